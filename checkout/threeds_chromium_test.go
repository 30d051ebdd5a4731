package checkout_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
)

// The 3-D Secure tests in Chromium: a shopper pays with a simulator card
// that asks for authentication, is sent by surgepay.js to the
// simulator's challenge page on surgepay's origin, answers it, and comes
// back through surgepay's return to the shop's page, which reads the
// payment through a freshly mounted frame (#returned). The money is
// checked at the simulator: never more than one authorization.

// challengeTitle is the simulator's challenge page's title and heading.
const challengeTitle = "Simulated 3-D Secure"

// waitTimeout bounds a wait for a page after a navigation, well inside
// testenv.BrowserTimeout so that a failure can still show the page.
const waitTimeout = 20 * time.Second

// stepWait runs actions, then waits (at most waitTimeout) for an element
// matching css, failing the test with the page's address and text if
// either fails.
func (b *browser) stepWait(what, css string, actions ...chromedp.Action[chromedp.Void]) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, append(actions, chromedp.WaitReady(chromedp.CSS(css)))...); err != nil {
		b.T.Fatalf("%s, then wait for %s: %v\n%s", what, css, err, b.Page())
	}
}

// goHistory moves delta pages back (negative) or forward in the tab's
// history, as the browser's buttons do, and waits until the page has an
// element matching css. Chromium may restore the page from its
// back-forward cache, which fires no load event (chromedp.NavigateBack
// would wait for one) and no DOM.documentUpdated (chromedp's copy of the
// DOM stays the old page's): so the wait asks the page's script, and
// chromedp is then attached to the tab afresh to read the DOM again.
func (b *browser) goHistory(what string, delta int, css string) {
	b.T.Helper()
	b.eval("history.go(" + strconv.Itoa(delta) + "), ''")
	b.waitJS(what, css)
	ctx, cancel := chromedp.NewContext(b.Ctx, chromedp.WithTargetID(chromedp.FromContext(b.Ctx).Target.TargetID))
	b.T.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		b.T.Fatalf("%s: attach to the tab again: %v", what, err)
	}
	b.Ctx = ctx
}

// waitJS waits (at most waitTimeout) until the page has an element
// matching css. It asks the page's script, not chromedp's copy of the
// DOM, which a page restored from the back-forward cache does not
// update (it gets no DOM.documentUpdated).
func (b *browser) waitJS(what, css string) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, waitTimeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise((resolve) => {
		const look = () => document.querySelector(`+strconv.Quote(css)+`) ? resolve(true) : setTimeout(look, 50);
		look();
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.T.Fatalf("%s: wait for %s: %v\n%s", what, css, err, b.Page())
	}
}

// eval evaluates a JavaScript expression of the page and returns its
// string value.
func (b *browser) eval(expr string) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.T.Fatalf("evaluate %s: %v\n%s", expr, err, b.Page())
	}
	return got
}

// location returns the address of the page.
func (b *browser) location() string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Location())
	if err != nil {
		b.T.Fatal(err)
	}
	return got
}

// pageText returns the text of the first element of the page (not the
// frame) matching a CSS selector.
func (b *browser) pageText(css string) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		b.T.Fatalf("the text of %s: %v\n%s", css, err, b.Page())
	}
	return strings.TrimSpace(got)
}

// payToChallenge clicks the shop's pay button for a card that asks for a
// challenge and waits for the simulator's challenge page, whose address
// it returns; it checks that the page is payment id's challenge on
// surgepay's origin, pending (both buttons), for 20.00 USD and the card
// ending last4.
func (b *browser) payToChallenge(e *env, id, last4 string) string {
	b.T.Helper()
	b.stepWait("pay, to the challenge", `button[value="`+sim.OutcomeAuthenticate+`"]`, chromedp.Click(chromedp.ID("pay")))
	at := b.location()
	if !strings.HasPrefix(at, e.api+surgepay.PagesPrefix+"3ds/") {
		b.T.Fatalf("the pay button led to %s, want the challenge page under %s", at, e.api+surgepay.PagesPrefix+"3ds/")
	}
	b.wantChallenge(last4)
	if p, _ := e.payment(id); p.Status != "requires_action" {
		b.T.Errorf("during the challenge the payment is %s, want requires_action", p.Status)
	}
	return at
}

// wantChallenge checks that the page is a pending challenge for 20.00
// USD with the card ending last4: its title, heading, amount, card and
// its two buttons' labels and values.
func (b *browser) wantChallenge(last4 string) {
	b.T.Helper()
	type view struct {
		Title   string   `json:"title"`
		H1      string   `json:"h1"`
		Details []string `json:"details"`
		Buttons []string `json:"buttons"`
	}
	got, err := chromedp.Run(b.Ctx, chromedp.Evaluate[view](`({
		title: document.title,
		h1: document.querySelector('h1').textContent.trim(),
		details: Array.from(document.querySelectorAll('dd'), (d) => d.textContent.trim()),
		buttons: Array.from(document.querySelectorAll('form button[type=submit]'), (x) => x.textContent.trim() + '=' + x.name + ':' + x.value),
	})`))
	if err != nil {
		b.T.Fatal(err)
	}
	want := view{Title: challengeTitle, H1: challengeTitle, Details: []string{"20.00 USD", "•••• ending in " + last4},
		Buttons: []string{"Authenticate=outcome:" + sim.OutcomeAuthenticate, "Fail=outcome:" + sim.OutcomeFail}}
	if got.Title != want.Title || got.H1 != want.H1 || strings.Join(got.Details, "|") != strings.Join(want.Details, "|") ||
		strings.Join(got.Buttons, "|") != strings.Join(want.Buttons, "|") {
		b.T.Errorf("the challenge page shows %+v, want %+v\n%s", got, want, b.Page())
	}
}

// answer clicks the challenge page's button for outcome and waits until
// the shopper is back on the shop's page and it has read the payment; it
// returns what the page shows (see returned). The address must carry
// surgepay's additions for payment id, redirect_status among them.
func (b *browser) answer(e *env, id, outcome, wantRedirect string) string {
	b.T.Helper()
	returns := e.hits.prefix(surgepay.CheckoutReturnPath)
	b.Step("answer the challenge: "+outcome, chromedp.Click(chromedp.CSS(`button[value="`+outcome+`"]`)))
	ctx, cancel := context.WithTimeout(b.Ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`#returned[data-n="1"]`))); err != nil {
		if at := b.location(); strings.HasPrefix(at, e.api+surgepay.PagesPrefix) && e.hits.prefix(surgepay.CheckoutReturnPath) > returns {
			b.T.Fatalf("answer the challenge (%s): surgepay's return was requested, but the browser stays on the challenge page %s: "+
				"the redirect to the shop (%s) was blocked, by the challenge page's CSP form-action?\n%s", outcome, at, e.shop, b.Page())
		}
		b.T.Fatalf("answer the challenge (%s), then wait for the shop's page: %v\n%s", outcome, err, b.Page())
	}
	u, err := url.Parse(b.location())
	if err != nil {
		b.T.Fatal(err)
	}
	if q := u.Query(); q.Get("surgepay_payment") != id || q.Get("redirect_status") != wantRedirect || q.Get("secret") == "" {
		b.T.Errorf("back on %s: want surgepay_payment=%s, redirect_status=%s and the shop's own query", u, id, wantRedirect)
	}
	got, via := b.returned()
	if via != "return" {
		b.T.Errorf("the shop read the payment on %q, want return", via)
	}
	return got
}

// returned returns what the shop's page shows of the payment it read on
// coming back (#returned), and how it came back (data-via).
func (b *browser) returned() (text, via string) {
	b.T.Helper()
	return b.pageText("#returned"), b.attr("#returned", "data-via")
}

// wantMoney checks the simulator's record of payment id: authorized
// (approved) n times for 20.00, declined declined times.
func (e *env) wantMoney(id string, n, declined int) {
	e.t.Helper()
	fx := e.sim.Effects(id)
	if fx.Authorizations != n || fx.AuthorizationsDeclined != declined || fx.AmountAuthorized != int64(n)*2000 {
		e.t.Errorf("the simulator's record of %s: %+v; want %d authorization(s) of 2000, %d declined", id, fx, n, declined)
	}
}

// TestThreeDSecureInChromium: a card that asks for a challenge sends the
// shopper to the simulator's challenge page (on surgepay's origin); the
// shopper authenticates and comes back to the shop's page, which reads
// the payment succeeded; the API agrees, and the simulator authorized
// once.
func TestThreeDSecureInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(sim.Card3DSChallenge, expiryOK, cvcOK)
	b.payToChallenge(e, p.ID, "3220")
	b.Shot("3ds-challenge")
	e.wantMoney(p.ID, 0, 0)
	if got := b.answer(e, p.ID, sim.OutcomeAuthenticate, "succeeded"); got != "succeeded" {
		t.Fatalf("back on the shop, it shows %q, want succeeded\n%s", got, b.Page())
	}
	b.Shot("3ds-succeeded")
	e.wantPaid(p.ID, "3220")
	e.wantMoney(p.ID, 1, 0)
	if seen := b.seen(); strings.Contains(seen, "3220") || strings.Contains(seen, `"cvc":`) {
		t.Errorf("the shop's page received card data:\n%s", seen)
	}
}

// TestThreeDSecureFailedInChromium: the shopper fails the challenge; back
// on the shop's page, the page reads the payment awaiting a card with
// the decline authentication_failed, and the frame says so; the shopper
// pays with another card on that page, and the simulator authorized once
// (the failed challenge moved no money).
func TestThreeDSecureFailedInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(sim.Card3DSChallenge, expiryOK, cvcOK)
	b.payToChallenge(e, p.ID, "3220")
	want := "requires_payment_method " + surgepay.DeclineAuthenticationFailed
	if got := b.answer(e, p.ID, sim.OutcomeFail, "failed"); got != want {
		t.Fatalf("back on the shop, it shows %q, want %q\n%s", got, want, b.Page())
	}
	b.Shot("3ds-failed")
	if got, _ := e.payment(p.ID); got.Status != "requires_payment_method" {
		t.Fatalf("after the failed challenge the payment is %s, want requires_payment_method", got.Status)
	}
	e.wantMoney(p.ID, 0, 1)
	b.typeCard(cardOK, expiryOK, cvcOK)
	if got := b.pay(); got != "succeeded" {
		t.Fatalf("the shop says %q after another card, want succeeded\n%s", got, b.Page())
	}
	if got := b.text("form-error"); got != "" {
		t.Errorf("the frame still shows %q after the success", got)
	}
	e.wantPaid(p.ID, "4242")
	e.wantMoney(p.ID, 1, 1)
}

// TestThreeDSecureReloadInChromium: a reload of the challenge page shows
// the same challenge, still pending and nothing charged; the shopper
// authenticates and the payment succeeds, authorized once.
func TestThreeDSecureReloadInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(sim.Card3DSChallenge, expiryOK, cvcOK)
	at := b.payToChallenge(e, p.ID, "3220")
	b.stepWait("reload the challenge", `button[value="`+sim.OutcomeAuthenticate+`"]`, chromedp.Reload())
	if got := b.location(); got != at {
		t.Errorf("after the reload the page is %s, want the challenge %s", got, at)
	}
	b.wantChallenge("3220")
	if got, _ := e.payment(p.ID); got.Status != "requires_action" {
		t.Errorf("after the reload the payment is %s, want requires_action", got.Status)
	}
	e.wantMoney(p.ID, 0, 0)
	if got := b.answer(e, p.ID, sim.OutcomeAuthenticate, "succeeded"); got != "succeeded" {
		t.Fatalf("back on the shop, it shows %q, want succeeded\n%s", got, b.Page())
	}
	e.wantPaid(p.ID, "3220")
	e.wantMoney(p.ID, 1, 0)
}

// TestThreeDSecureBackInChromium: the shopper goes back from the
// challenge to the shop's page (Chromium restores it from its
// back-forward cache, card typed; or loads it again), which reads the
// payment still awaiting authentication and offers the challenge again.
// Paying again there (a card that asks for a challenge too) cancels the
// first challenge and leads to a new one: nothing authorized, the first
// challenge's authorization declined. The shopper authenticates:
// succeeded, authorized once. Back again, the challenge page says it has
// ended, and its link returns to the shop, which reads succeeded: still
// one authorization. The first challenge's page says it was cancelled.
func TestThreeDSecureBackInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(sim.Card3DSChallenge, expiryOK, cvcOK)
	at := b.payToChallenge(e, p.ID, "3220")
	b.goHistory("go back to the shop", -1, `#returned[data-n="1"]`)
	got, via := b.returned()
	resume := b.attr("#resume", "href")
	t.Logf("back on the shop's page by %s", via)
	if got != "authentication pending" || (via != "restored" && via != "load") {
		t.Fatalf("back on the shop, it shows %q (by %s), want authentication pending\n%s", got, via, b.Page())
	}
	if resume != at {
		t.Errorf("the shop offers the challenge at %q, want %q", resume, at)
	}
	b.Shot("3ds-pending")
	// The shopper pays again on that page: the first challenge is
	// cancelled and a new one begins.
	if via == "load" {
		b.typeCard(sim.Card3DSChallenge, expiryOK, cvcOK)
	}
	confirms := len(e.hits.confirmKeys())
	again := b.payToChallenge(e, p.ID, "3220")
	if again == at {
		t.Errorf("paying again led to the first challenge %s, want a new one", at)
	}
	if n := len(e.hits.confirmKeys()) - confirms; n != 1 {
		t.Errorf("paying again sent %d confirms, want 1 (surgepay.js must not hold on to the confirm that left the page)", n)
	}
	e.wantMoney(p.ID, 0, 1)
	if got := b.answer(e, p.ID, sim.OutcomeAuthenticate, "succeeded"); got != "succeeded" {
		t.Fatalf("back on the shop, it shows %q, want succeeded\n%s", got, b.Page())
	}
	e.wantPaid(p.ID, "3220")
	e.wantMoney(p.ID, 1, 1)

	// Back from the shop's page to the challenge, which has ended. Fetched
	// again, the page says so and links back to the shop. Restored from
	// the back-forward cache (Chromium may keep even a no-store page), it
	// still shows the buttons: the shopper's Fail, after the challenge
	// ended, changes nothing.
	requests := e.hits.prefix(strings.TrimPrefix(again, e.api))
	b.goHistory("go back to the challenge", -1, `h1#title`)
	if got := b.location(); got != again {
		t.Errorf("back leads to %s, want the challenge %s", got, again)
	}
	if e.hits.prefix(strings.TrimPrefix(again, e.api)) > requests {
		if got := b.pageText(`p[role="status"]`); !strings.Contains(got, "You authenticated this payment") {
			t.Errorf("the ended challenge says %q, want that it was authenticated", got)
		}
		if n := b.eval(`String(document.querySelectorAll('button').length)`); n != "0" {
			t.Errorf("the ended challenge has %s buttons, want none", n)
		}
		b.Shot("3ds-ended")
		b.stepWait("return to the merchant", `#returned[data-n="1"]`, chromedp.Click(chromedp.CSS(`main a`)))
		if got, via := b.returned(); got != "succeeded" || via != "return" {
			t.Errorf("the link back to the shop shows %q by %s, want succeeded by return", got, via)
		}
	} else {
		t.Log("the challenge page came back from the back-forward cache, with its buttons")
		b.wantChallenge("3220")
		if got := b.answer(e, p.ID, sim.OutcomeFail, "succeeded"); got != "succeeded" {
			t.Errorf("Fail on the ended challenge: the shop shows %q, want succeeded", got)
		}
	}
	e.wantPaid(p.ID, "3220")
	e.wantMoney(p.ID, 1, 1)

	// The first challenge, opened again: cancelled, no buttons.
	b.Step("open the first challenge", chromedp.Navigate(at), chromedp.WaitReady(chromedp.CSS(`p[role="status"]`)))
	if got := b.pageText(`p[role="status"]`); !strings.Contains(got, "This authentication was cancelled") {
		t.Errorf("the first challenge says %q, want that it was cancelled", got)
	}
	if n := b.eval(`String(document.querySelectorAll('button').length)`); n != "0" {
		t.Errorf("the cancelled challenge has %s buttons, want none", n)
	}
	e.wantMoney(p.ID, 1, 1)
}

// TestThreeDSecureCardsInChromium: the other 3-D Secure test cards. A
// frictionless card pays without leaving the shop's page (no challenge
// page asked for); a card that the issuer declines once authenticated
// goes through the challenge and comes back declined generic_decline;
// a card whose authentication is unavailable is declined at once, shown
// in the frame, nothing charged.
func TestThreeDSecureCardsInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)

	p := e.newPayment()
	u := e.shopURL(e.shop, p.ClientSecret)
	b.open(u)
	b.typeCard(sim.Card3DSFrictionless, expiryOK, cvcOK)
	if got := b.pay(); got != "succeeded" {
		t.Fatalf("frictionless: the shop says %q, want succeeded\n%s", got, b.Page())
	}
	if got := b.location(); got != u {
		t.Errorf("frictionless: the page moved to %s", got)
	}
	if n := e.hits.prefix(surgepay.PagesPrefix); n != 0 {
		t.Errorf("frictionless: %d requests for the simulator's pages, want none", n)
	}
	e.wantPaid(p.ID, "3055")
	e.wantMoney(p.ID, 1, 0)

	p = e.newPayment()
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(sim.Card3DSChallengeDeclined, expiryOK, cvcOK)
	b.payToChallenge(e, p.ID, "1629")
	want := "requires_payment_method " + surgepay.DeclineGeneric
	if got := b.answer(e, p.ID, sim.OutcomeAuthenticate, "failed"); got != want {
		t.Fatalf("authenticated then declined: the shop shows %q, want %q\n%s", got, want, b.Page())
	}
	b.Shot("3ds-declined")
	if got, _ := e.payment(p.ID); got.Status != "requires_payment_method" {
		t.Errorf("authenticated then declined: the payment is %s, want requires_payment_method", got.Status)
	}
	e.wantMoney(p.ID, 0, 1)

	p = e.newPayment()
	u = e.shopURL(e.shop, p.ClientSecret)
	b.open(u)
	pages := e.hits.prefix(surgepay.PagesPrefix)
	b.typeCard(sim.Card3DSUnavailable, expiryOK, cvcOK)
	want = "error card_declined " + surgepay.DeclineAuthenticationUnavailable
	if got := b.pay(); got != want {
		t.Fatalf("authentication unavailable: the shop says %q, want %q\n%s", got, want, b.Page())
	}
	if got := b.text("form-error"); got != "Your card was declined." {
		t.Errorf("authentication unavailable: the frame says %q, want Your card was declined.", got)
	}
	b.Shot("3ds-unavailable")
	if got := b.location(); got != u || e.hits.prefix(surgepay.PagesPrefix) != pages {
		t.Errorf("authentication unavailable: the page moved to %s, or asked for a challenge", got)
	}
	if got, _ := e.payment(p.ID); got.Status != "requires_payment_method" {
		t.Errorf("authentication unavailable: the payment is %s, want requires_payment_method", got.Status)
	}
	e.wantMoney(p.ID, 0, 1)
}
