package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/webhook"
)

// Simulator test cards (provider/sim/cards.go).
const (
	cardOK       = "4242424242424242"
	cardDeclined = "4000000000000002" // generic_decline
	card3DS      = "4000000000003220" // 3-D Secure challenge (sim.Card3DSChallenge)
	expiryOK     = "1230"
	cvcOK        = "123"
)

const (
	// webhookWait bounds the wait for a webhook to reach the shop: the
	// dispatcher is woken by the payment's commit, so it takes well under
	// a second; the bound is for a loaded CI machine.
	webhookWait = 20 * time.Second
)

// browser is a headless Chromium visiting the shop, as a shopper would
// (testenv.Browser; screenshots shop-NAME.png).
type browser struct{ *testenv.Browser }

// newBrowser starts Chromium for the test (skipped without one, outside
// CI; failed in CI), stopped when the test ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	return &browser{testenv.NewBrowser(t, "the example shop's browser test", "shop-", 900, 800)}
}

// path is the path of the page's address.
func (b *browser) path() string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`location.pathname`))
	if err != nil {
		b.T.Fatal(err)
	}
	return got
}

// text returns the text of the shop page's element with the id.
func (b *browser) text(id string) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		b.T.Fatalf("the text of #%s: %v\n%s", id, err, b.Page())
	}
	return strings.TrimSpace(got)
}

// typeInto types text into a field of the card frame, after deleting
// what it holds, as a shopper would with the keyboard.
func (b *browser) typeInto(id, text string) {
	b.T.Helper()
	b.Step("type into #"+id, chromedp.SendKeys(chromedp.ID(id), kb.End+strings.Repeat(kb.Backspace, 25)+text, b.in()))
}

// in returns the query option that looks inside the card frame (on the
// same site as the shop, so Chromium keeps it in the page's process).
func (b *browser) in() chromedp.QueryOption {
	b.T.Helper()
	nodes, err := chromedp.Run(b.Ctx, chromedp.Nodes(chromedp.CSS(`#card iframe`)))
	if err != nil || len(nodes) != 1 {
		b.T.Fatalf("the card frame: %d nodes (%v)\n%s", len(nodes), err, b.Page())
	}
	return chromedp.FromNode(nodes[0])
}

// frameText returns the text of an element of the card frame.
func (b *browser) frameText(id string) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.TextContent(chromedp.ID(id), b.in()))
	if err != nil {
		b.T.Fatalf("the text of #%s in the frame: %v", id, err)
	}
	return strings.TrimSpace(got)
}

func (b *browser) typeCard(number, expiry, cvc string) {
	b.T.Helper()
	b.typeInto("number", number)
	b.typeInto("expiry", expiry)
	b.typeInto("cvc", cvc)
}

// buy opens the product page, buys the mug and waits for the pay page
// with its card frame ready (the Pay button is enabled once it is). It
// returns the order's ID.
func (b *browser) buy(e *env, shot bool) string {
	b.T.Helper()
	b.Step("open the shop", chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.ID("buy-mug")))
	if shot {
		b.Shot("products")
	}
	b.Step("buy the mug", chromedp.Click(chromedp.ID("buy-mug")),
		chromedp.WaitVisible(chromedp.CSS(`#pay:not([disabled])`)))
	order, ok := strings.CutPrefix(b.path(), "/pay/")
	if !ok {
		b.T.Fatalf("after Buy the page is %s, want /pay/ORDER", b.path())
	}
	return order
}

// payAndSee clicks Pay and waits for the order page.
func (b *browser) payAndSee() string {
	b.T.Helper()
	b.Step("pay", chromedp.Click(chromedp.ID("pay")), chromedp.WaitVisible(chromedp.ID("state")))
	return b.text("state")
}

// payInto3DS clicks Pay with a 3-D Secure card typed and waits for the
// simulator's challenge page, where surgepay.js sends the whole page.
func (b *browser) payInto3DS(e *env) {
	b.T.Helper()
	b.Step("pay with the 3-D Secure card", chromedp.Click(chromedp.ID("pay")),
		chromedp.WaitVisible(chromedp.CSS(`button[value="authenticate"]`)))
	b.onChallenge(e)
}

// onChallenge checks that the page is the simulator's challenge page,
// served by surgepay.
func (b *browser) onChallenge(e *env) {
	b.T.Helper()
	href, err := chromedp.Run(b.Ctx, chromedp.Location())
	if err != nil {
		b.T.Fatal(err)
	}
	if !strings.HasPrefix(href, e.api+"/simulator/v1/3ds/") {
		b.T.Fatalf("the page is %s, want the challenge page %s/simulator/v1/3ds/ID", href, e.api)
	}
}

// challenge presses the challenge page's button for outcome (sim's
// authenticate or fail) and waits for the shop's order page, through
// surgepay's return.
func (b *browser) challenge(outcome string) string {
	b.T.Helper()
	b.Step("press "+outcome+" on the challenge page", chromedp.Click(chromedp.CSS(`button[value="`+outcome+`"]`)),
		chromedp.WaitVisible(chromedp.ID("state")))
	return b.text("state")
}

// waitWebhook reloads the order page until it lists a webhook of type
// typ, within webhookWait; it returns the list's text.
func (b *browser) waitWebhook(typ string) string {
	b.T.Helper()
	deadline := time.Now().Add(webhookWait)
	for {
		if got := b.text("webhooks"); strings.Contains(got, typ) || time.Now().After(deadline) {
			return got
		}
		b.Step("reload the order page", chromedp.Sleep(200*time.Millisecond), chromedp.Reload(),
			chromedp.WaitVisible(chromedp.ID("webhooks")))
	}
}

// TestPayInChromium: the happy path. A shopper buys the mug, types a
// good card into surgepay's frame on the pay page and pays; the order
// page (read from surgepay by the shop's server) says Paid, and shows
// the payment.succeeded webhook, which the shop verified; the API agrees.
func TestPayInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	order := b.buy(e, true)
	if got := b.text("checkout"); !strings.Contains(got, "Pay 20.00 USD") {
		t.Errorf("the pay page shows %q, want a Pay 20.00 USD button", got)
	}
	b.typeCard(cardOK, expiryOK, cvcOK)
	b.Shot("pay")
	if got := b.payAndSee(); got != "Paid" {
		t.Fatalf("the order page says %q, want Paid\n%s", got, b.Page())
	}
	if got, want := b.path(), "/orders/"+order; got != want {
		t.Errorf("the order page is at %s, want %s", got, want)
	}
	if got := b.waitWebhook("payment.succeeded"); !strings.Contains(got, "payment.succeeded") || !strings.Contains(got, "signature verified") {
		t.Errorf("the order page lists the webhooks %q, want payment.succeeded, verified, within %s", got, webhookWait)
	}
	b.Shot("paid")
	if id, status := e.paymentStatus(order); status != "succeeded" {
		t.Errorf("the API says payment %s is %s, want succeeded", id, status)
	}
}

// TestDeclineThenPayInChromium: a declined card shows the decline on the
// pay page and leaves the payment awaiting a card; the shopper types a
// good one and pays the same payment: one successful charge.
func TestDeclineThenPayInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	order := b.buy(e, false)
	b.typeCard(cardDeclined, expiryOK, cvcOK)
	b.Step("pay with the declined card", chromedp.Click(chromedp.ID("pay")),
		chromedp.WaitVisible(chromedp.CSS(`#pay:not([disabled])`)))
	b.Step("wait for the error", chromedp.Poll[chromedp.Void](`document.getElementById('error').textContent !== ''`))
	if got := b.text("error"); !strings.Contains(got, "not made") {
		t.Errorf("the pay page's error says %q, want the payment not made", got)
	}
	if got := b.frameText("form-error"); !strings.Contains(got, "declined") {
		t.Errorf("the card frame's error says %q, want the decline", got)
	}
	b.Shot("declined")
	if id, status := e.paymentStatus(order); status != "requires_payment_method" {
		t.Fatalf("after the decline payment %s is %s, want requires_payment_method", id, status)
	}
	b.typeInto("number", cardOK)
	if got := b.payAndSee(); got != "Paid" {
		t.Fatalf("the order page says %q after the good card, want Paid\n%s", got, b.Page())
	}
	id, status := e.paymentStatus(order)
	if status != "succeeded" {
		t.Errorf("the API says payment %s is %s, want succeeded", id, status)
	}
	if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.AuthorizationsDeclined != 1 || fx.Captures != 1 || fx.AmountCaptured != 2000 {
		t.Errorf("the network's effects: %+v; want one declined authorization, one approved, one capture of 2000", fx)
	}
}

// TestBackAfterPaidInChromium: the back button from the order page goes
// to the pay page, whose server sends a paid order to its order page:
// no card form, no second charge.
func TestBackAfterPaidInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	order := b.buy(e, false)
	b.typeCard(cardOK, expiryOK, cvcOK)
	if got := b.payAndSee(); got != "Paid" {
		t.Fatalf("the order page says %q, want Paid\n%s", got, b.Page())
	}
	b.Step("go back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.ID("state")))
	if got, want := b.path(), "/orders/"+order; got != want || b.text("state") != "Paid" {
		t.Errorf("back from the order page: %s saying %q, want %s saying Paid", got, b.text("state"), want)
	}
	id, _ := e.paymentStatus(order)
	if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.Captures != 1 {
		t.Errorf("the network's effects: %+v; want one authorization and one capture", fx)
	}
}

// TestThreeDSecureInChromium: a card whose bank asks for 3-D Secure
// sends the shopper from the pay page to the bank's (the simulator's)
// challenge page; Authenticate comes back through surgepay to the order
// page, which says Paid and shows the verified payment.succeeded webhook.
func TestThreeDSecureInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	order := b.buy(e, false)
	b.typeCard(card3DS, expiryOK, cvcOK)
	b.payInto3DS(e)
	b.Shot("3ds-challenge")
	if id, status := e.paymentStatus(order); status != "requires_action" {
		t.Errorf("on the challenge page payment %s is %s, want requires_action", id, status)
	}
	if got := b.challenge("authenticate"); got != "Paid" {
		t.Fatalf("the order page says %q after authenticating, want Paid\n%s", got, b.Page())
	}
	if got, want := b.path(), "/orders/"+order; got != want {
		t.Errorf("back from the challenge at %s, want %s", got, want)
	}
	if got := b.waitWebhook("payment.succeeded"); !strings.Contains(got, "payment.succeeded") || !strings.Contains(got, "signature verified") {
		t.Errorf("the order page lists the webhooks %q, want payment.succeeded, verified, within %s", got, webhookWait)
	}
	b.Shot("3ds-paid")
	id, status := e.paymentStatus(order)
	if status != "succeeded" {
		t.Errorf("the API says payment %s is %s, want succeeded", id, status)
	}
	if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.Captures != 1 || fx.AmountCaptured != 2000 {
		t.Errorf("the network's effects: %+v; want one authorization, one capture of 2000", fx)
	}
}

// TestThreeDSecureFailedThenPayInChromium: Fail on the challenge page
// comes back to the order page, which says the authentication failed and
// offers to pay again; another card pays the same payment: one charge.
func TestThreeDSecureFailedThenPayInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	order := b.buy(e, false)
	b.typeCard(card3DS, expiryOK, cvcOK)
	b.payInto3DS(e)
	if got := b.challenge("fail"); got != "Awaiting payment" {
		t.Fatalf("the order page says %q after a failed authentication, want Awaiting payment\n%s", got, b.Page())
	}
	if got := b.text("last-decline"); !strings.Contains(got, "did not confirm") || !strings.Contains(got, "nothing was charged") {
		t.Errorf("the order page explains the failure as %q, want the bank did not confirm, nothing charged", got)
	}
	if got := b.text("pay-link"); got != "Pay again" {
		t.Errorf("the order page's link says %q, want Pay again", got)
	}
	if id, status := e.paymentStatus(order); status != "requires_payment_method" {
		t.Fatalf("after the failed authentication payment %s is %s, want requires_payment_method", id, status)
	}
	b.Step("pay again", chromedp.Click(chromedp.ID("pay-link")), chromedp.WaitVisible(chromedp.CSS(`#pay:not([disabled])`)))
	if got := b.text("last-decline"); !strings.Contains(got, "did not confirm") {
		t.Errorf("the pay page explains the last attempt as %q, want the failed authentication", got)
	}
	b.typeCard(cardOK, expiryOK, cvcOK)
	if got := b.payAndSee(); got != "Paid" {
		t.Fatalf("the order page says %q after the good card, want Paid\n%s", got, b.Page())
	}
	id, status := e.paymentStatus(order)
	if status != "succeeded" {
		t.Errorf("the API says payment %s is %s, want succeeded", id, status)
	}
	if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.Captures != 1 || fx.AmountCaptured != 2000 {
		t.Errorf("the network's effects: %+v; want exactly one successful authorization, one capture of 2000", fx)
	}
}

// TestBackFromChallengeInChromium: the back button from the challenge
// page comes to a pay page whose payment takes no card (the bank waits):
// the server shows the way back to the bank's page, not the card form, so
// the shopper cannot pay twice; the way back authenticates and pays once.
func TestBackFromChallengeInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	order := b.buy(e, false)
	b.typeCard(card3DS, expiryOK, cvcOK)
	b.payInto3DS(e)
	b.Step("go back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.ID("continue")))
	if got, want := b.path(), "/pay/"+order; got != want {
		t.Errorf("back from the challenge: %s, want %s", got, want)
	}
	if got := b.text("pending"); !strings.Contains(got, "waiting for you") {
		t.Errorf("the pay page says %q, want the bank waiting", got)
	}
	if n, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll('#pay').length`)); err != nil || n != 0 {
		t.Errorf("the pay page of a payment awaiting authentication has %d Pay buttons (%v), want none", n, err)
	}
	b.Step("continue to the bank", chromedp.Click(chromedp.ID("continue")),
		chromedp.WaitVisible(chromedp.CSS(`button[value="authenticate"]`)))
	b.onChallenge(e)
	if got := b.challenge("authenticate"); got != "Paid" {
		t.Fatalf("the order page says %q after authenticating, want Paid\n%s", got, b.Page())
	}
	id, _ := e.paymentStatus(order)
	if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.Captures != 1 || fx.AmountCaptured != 2000 {
		t.Errorf("the network's effects: %+v; want one authorization, one capture of 2000", fx)
	}
}

// TestStaleFormDuringChallengeInChromium: a pay page opened before the
// payment went to the bank's page (another tab) still shows the form; a
// card paid there cancels the pending challenge first, as Stripe cancels
// a PaymentIntent awaiting authentication when it is confirmed again, and
// pays: the order is Paid, the other tab's challenge page says it was
// cancelled, and its Authenticate, answered late, charges nothing. One
// charge in all.
func TestStaleFormDuringChallengeInChromium(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	order := b.buy(e, false)
	// A second tab of the same browser, on the same pay page.
	ctx, cancel := chromedp.NewContext(b.Ctx)
	defer cancel()
	b2 := &browser{&testenv.Browser{T: t, Ctx: ctx, Dir: b.Dir, Prefix: b.Prefix}}
	b2.Step("open the pay page in another tab", chromedp.Navigate(e.url+"/pay/"+order),
		chromedp.WaitVisible(chromedp.CSS(`#pay:not([disabled])`)))
	b2.typeCard(card3DS, expiryOK, cvcOK)
	b2.payInto3DS(e)

	b.typeCard(cardOK, expiryOK, cvcOK)
	if got := b.payAndSee(); got != "Paid" {
		t.Fatalf("the stale form's Pay leads to an order page saying %q, want Paid\n%s", got, b.Page())
	}
	if got, want := b.path(), "/orders/"+order; got != want {
		t.Errorf("the stale form's Pay leads to %s, want %s", got, want)
	}
	id, status := e.paymentStatus(order)
	want := func(what string) {
		t.Helper()
		if fx := e.sim.Effects(id); status != "succeeded" || fx.Authorizations != 1 || fx.AuthorizationsDeclined != 1 ||
			fx.Captures != 1 || fx.AmountCaptured != 2000 {
			t.Fatalf("%s: payment %s is %s, effects %+v; want succeeded, one sale of 2000 and the cancelled challenge declined",
				what, id, status, fx)
		}
	}
	want("after the stale form's Pay")
	// The other tab, still on the challenge page: reloaded, it says the
	// authentication was cancelled, with no buttons.
	b2.Step("reload the challenge in the other tab", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`a[href]`)))
	if got := b2.Page(); !strings.Contains(got, "This authentication was cancelled") || strings.Contains(got, "Authenticate") {
		t.Errorf("the other tab's challenge page: %s, want it cancelled, without its buttons", got)
	}
	_, status = e.paymentStatus(order)
	want("after the other tab's reload")
}

// TestLastDecline: the order and pay pages say why the last card did
// not pay, in words, only while the payment awaits another card.
func TestLastDecline(t *testing.T) {
	for _, c := range []struct {
		status, code, message string
		want                  string
	}{
		{"requires_payment_method", "authentication_failed", "", "did not confirm"},
		{"requires_payment_method", "generic_decline", "Declined by the issuer.", "Your card was declined."},
		{"requires_payment_method", "do_not_honor", "The issuer refused", "Your card was declined: The issuer refused."},
		{"requires_payment_method", "", "", ""},
		{"succeeded", "authentication_failed", "", ""},
	} {
		got := lastDecline(&payment{Status: c.status, DeclineCode: c.code, FailureMessage: c.message})
		if (c.want == "" && got != "") || !strings.Contains(got, c.want) {
			t.Errorf("lastDecline(%s, %s) = %q, want %q", c.status, c.code, got, c.want)
		}
	}
}

// TestOrderPageAwaitingPayment: an order not yet paid says so on its
// order page, with a link to pay, whatever the browser claims: the page
// is read from surgepay by the shop's server. No browser needed.
func TestOrderPageAwaitingPayment(t *testing.T) {
	e := newEnv(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.PostForm(e.url+"/checkout", map[string][]string{"product": {"mug"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	pay := res.Header.Get("Location")
	order, ok := strings.CutPrefix(pay, "/pay/")
	if res.StatusCode != http.StatusSeeOther || !ok {
		t.Fatalf("POST /checkout = %d to %q, want 303 to /pay/ORDER", res.StatusCode, pay)
	}
	body := get(t, e.url+"/orders/"+order+"?status=succeeded")
	if !strings.Contains(body, "Awaiting payment") || !strings.Contains(body, `href="/pay/`+order+`"`) {
		t.Errorf("the unpaid order's page:\n%s\nwant Awaiting payment with a link to pay", body)
	}
	if body := get(t, e.url+"/pay/"+order); !strings.Contains(body, `data-secret="pay_`) {
		t.Errorf("the pay page has no client secret:\n%s", body)
	}
	res, err = http.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'self' "+e.api+";") ||
		!strings.Contains(got, "frame-src "+e.api+";") || !strings.Contains(got, "frame-ancestors 'none'") {
		t.Errorf("the CSP is %q, want scripts and frames from self and %s only, no framing", got, e.api)
	}
}

// TestWebhookSignature: the shop's receiver refuses a bad signature, a
// stale one and a body past its bound; it records a good event once,
// however often it is delivered. No browser, no surgepay: the events are
// signed here as surgepay signs them.
func TestWebhookSignature(t *testing.T) {
	secret := "whsec_test"
	shop, err := newShop(Config{API: "http://127.0.0.1:1", SecretKey: "sk_test_x", PublishableKey: "pk_test_x", WebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	o, err := shop.orders.add(products[0])
	if err != nil {
		t.Fatal(err)
	}
	shop.orders.setPayment(o.ID, "pay_1")
	url := serve(t, listen(t), shop.Handler()) + "/webhooks"
	ev := []byte(`{"id":"evt_1","object":"event","type":"payment.succeeded","created":1744301000,
		"data":{"object":{"id":"pay_1","object":"payment","status":"succeeded","metadata":{"order":"` + o.ID + `"}},"previous_status":"requires_payment_method"}}`)
	post := func(body []byte, sig string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderSignature, sig)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	now := time.Now()
	for _, c := range []struct {
		name string
		body []byte
		sig  string
		want int
	}{
		{"ErrOtherSecret", ev, webhook.Signature(now, ev, []byte("whsec_other")), 400},
		{"ErrBodyChanged", bytes.Replace(ev, []byte("succeeded"), []byte("failed"), 1), webhook.Signature(now, ev, []byte(secret)), 400},
		{"ErrStale", ev, webhook.Signature(now.Add(-time.Hour), ev, []byte(secret)), 400},
		{"ErrMalformed", ev, "v1=zz", 400},
		{"ErrNone", ev, "", 400},
		{"ErrTooLarge", append(ev, bytes.Repeat([]byte(" "), WebhookBodyBytesMax)...), "", 413},
		{"OK", ev, webhook.Signature(now, ev, []byte(secret)), 200},
		{"OKAgain", ev, webhook.Signature(now, ev, []byte(secret)), 200},
		{"OKRolled", ev, webhook.Signature(now, ev, []byte("whsec_new"), []byte(secret)), 200},
	} {
		if got := post(c.body, c.sig); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
	got, _ := shop.orders.get(o.ID)
	if len(got.Events) != 1 || got.Events[0].Type != "payment.succeeded" || got.Events[0].EventID != "evt_1" {
		t.Errorf("the order's events: %+v, want payment.succeeded evt_1 once", got.Events)
	}
}

func TestFormatMoney(t *testing.T) {
	for _, c := range []struct {
		amount   int64
		currency string
		want     string
	}{{2000, "usd", "20.00 USD"}, {5, "eur", "0.05 EUR"}, {1800, "jpy", "1800 JPY"}, {1234, "kwd", "1.234 KWD"}, {-150, "usd", "-1.50 USD"}} {
		if got := formatMoney(c.amount, c.currency); got != c.want {
			t.Errorf("formatMoney(%d, %s) = %q, want %q", c.amount, c.currency, got, c.want)
		}
	}
}

// get returns the body of a GET that must answer 200.
func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", url, res.StatusCode, b.String())
	}
	return b.String()
}
