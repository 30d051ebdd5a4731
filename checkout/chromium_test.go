package checkout_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
)

// Simulator test cards (provider/sim/cards.go).
const (
	cardOK       = "4242424242424242"
	cardDeclined = "4000000000000002" // generic_decline
	cardWrongCVC = "4000000000000127" // incorrect_cvc
	cardNoFunds  = "4000000000009995" // insufficient_funds
	cardExpired  = "4000000000000069" // expired_card
	cardBadLuhn  = "4242424242424241"
	expiryOK     = "1230"
	cvcOK        = "123"
)

// browser is a headless Chromium visiting an env's shop, as a shopper
// would (testenv.Browser; screenshots checkout-NAME.png).
type browser struct{ *testenv.Browser }

// newBrowser starts Chromium for the test (skipped without one, outside
// CI), stopped when the test ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	return &browser{testenv.NewBrowser(t, "the checkout's browser test", "checkout-", 900, 800)}
}

// open visits a shop page and waits until its card frame is mounted.
func (b *browser) open(u string) {
	b.T.Helper()
	b.Step("open the shop", chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS(`body[data-mounted]`)))
	if got := b.attr("body", "data-mounted"); got != "ready" {
		b.T.Fatalf("the card frame's mount says %q, want ready\n%s", got, b.Page())
	}
}

// frame returns the card frame's iframe node (its content document is
// queried through it: the frame is on the same site as the shop, so
// Chromium keeps it in the page's process).
func (b *browser) frame() *chromedp.Node {
	b.T.Helper()
	nodes, err := chromedp.Run(b.Ctx, chromedp.Nodes(chromedp.CSS(`#card iframe`)))
	if err != nil || len(nodes) != 1 {
		b.T.Fatalf("the card frame: %d nodes (%v)\n%s", len(nodes), err, b.Page())
	}
	return nodes[0]
}

// in returns the query option that looks inside the card frame.
func (b *browser) in() chromedp.QueryOption { return chromedp.FromNode(b.frame()) }

// typeInto types text into a field of the frame, after deleting what it
// holds, as a shopper would with the keyboard.
func (b *browser) typeInto(id, text string) {
	b.T.Helper()
	in := b.in()
	b.Step("type into #"+id, chromedp.SendKeys(chromedp.ID(id), kb.End+strings.Repeat(kb.Backspace, 25)+text, in))
}

// typeCard types a card into the frame's three fields.
func (b *browser) typeCard(number, expiry, cvc string) {
	b.T.Helper()
	b.typeInto("number", number)
	b.typeInto("expiry", expiry)
	b.typeInto("cvc", cvc)
}

// text returns the text of an element of the frame.
func (b *browser) text(id string) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.TextContent(chromedp.ID(id), b.in()))
	if err != nil {
		b.T.Fatalf("the text of #%s in the frame: %v", id, err)
	}
	return strings.TrimSpace(got)
}

// value returns the value of an input of the frame.
func (b *browser) value(id string) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Value(chromedp.ID(id), b.in()))
	if err != nil {
		b.T.Fatalf("the value of #%s in the frame: %v", id, err)
	}
	return got
}

// attr returns an attribute of the first element matching a CSS
// selector, given options such as b.in().
func (b *browser) attr(css, name string, opts ...chromedp.QueryOption) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.AttributeValue(chromedp.CSS(css), name, opts...))
	if err != nil {
		b.T.Fatalf("attribute %s: %v\n%s", name, err, b.Page())
	}
	return got.Value
}

// invalid reports the aria-invalid of a frame's field.
func (b *browser) invalid(id string) string { return b.attr("#"+id, "aria-invalid", b.in()) }

// pay clicks the shop's pay button and returns the outcome the shop
// writes: the payment's status, or "error CODE [DECLINE_CODE]".
func (b *browser) pay() string {
	b.T.Helper()
	return b.click("pay", "result")
}

// check clicks the shop's button that reads the payment (retrievePayment)
// and returns what the shop writes: "STATUS AMOUNT CURRENCY" or "error CODE".
func (b *browser) check() string {
	b.T.Helper()
	return b.click("check", "checked")
}

// click clicks a button and returns the text of out once its data-n
// counts one more answer.
func (b *browser) click(button, out string) string {
	b.T.Helper()
	n, _ := strconv.Atoi(b.attr("#"+out, "data-n"))
	b.Step("click #"+button, chromedp.Click(chromedp.ID(button)),
		chromedp.WaitReady(chromedp.CSS(`#`+out+`[data-n="`+strconv.Itoa(n+1)+`"]`)))
	got, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.ID(out)))
	if err != nil {
		b.T.Fatal(err)
	}
	return strings.TrimSpace(got)
}

// seen returns the messages the shop's page received, as JSON.
func (b *browser) seen() string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`window.seen.join("\n")`))
	if err != nil {
		b.T.Fatal(err)
	}
	return got
}

// wantPaid checks through the API that payment id succeeded with the
// card ending in last4.
func (e *env) wantPaid(id, last4 string) {
	e.t.Helper()
	p, l4 := e.payment(id)
	if p.Status != "succeeded" || l4 != last4 || p.Amount != 2000 {
		e.t.Errorf("the payment through the API: %s, %d, card ending %q; want succeeded, 2000, %s", p.Status, p.Amount, l4, last4)
	}
}

// TestPayInChromium: the happy path. A shopper types a card into the
// frame on the merchant's shop (brand shown as typed, number grouped)
// and pays; the shop's page says succeeded, the API has the payment
// succeeded with that card, and no card digits reached the shop's page.
func TestPayInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	// Keyboard only: the number, Tab, the expiry, Tab, the CVC.
	b.Step("type the card", chromedp.SendKeys(chromedp.ID("number"), cardOK+kb.Tab+expiryOK+kb.Tab+cvcOK, b.in()))
	if got, brand := b.value("number"), b.text("brand"); got != "4242 4242 4242 4242" || brand != "Visa" {
		t.Errorf("the number field shows %q with brand %q, want 4242 4242 4242 4242 and Visa", got, brand)
	}
	if got, cvc := b.value("expiry"), b.value("cvc"); got != "12 / 30" || cvc != cvcOK {
		t.Errorf("the expiry and CVC fields show %q and %q, want 12 / 30 and %s (Tab moves from field to field)", got, cvc, cvcOK)
	}
	b.Shot("card")
	if got := b.pay(); got != "succeeded" {
		t.Fatalf("the shop says %q, want succeeded\n%s", got, b.Page())
	}
	b.Shot("succeeded")
	e.wantPaid(p.ID, "4242")
	if got := b.check(); got != "succeeded 2000 usd" {
		t.Errorf("retrievePayment says %q, want succeeded 2000 usd", got)
	}
	if seen := b.seen(); strings.Contains(seen, "424242") || strings.Contains(seen, `"cvc":`) || strings.Contains(seen, "12 / 30") {
		t.Errorf("the shop's page received card data:\n%s", seen)
	}
}

// TestDeclineThenPayInChromium: a declined card shows the decline in the
// frame (on the form; an expired card at the expiry) and leaves the
// payment awaiting a card; the shopper types another card and pays the
// same payment.
func TestDeclineThenPayInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(cardDeclined, expiryOK, cvcOK)
	if got := b.pay(); got != "error card_declined generic_decline" {
		t.Fatalf("the shop says %q, want the generic decline\n%s", got, b.Page())
	}
	if got := b.text("form-error"); !strings.Contains(got, "declined") {
		t.Errorf("the frame's form error says %q, want the decline", got)
	}
	b.Shot("declined")
	if got, _ := e.payment(p.ID); got.Status != "requires_payment_method" {
		t.Fatalf("after the decline the payment is %s, want requires_payment_method", got.Status)
	}
	b.typeInto("number", cardNoFunds)
	if got := b.text("form-error"); got != "" {
		t.Errorf("the form error stays after the number changed: %q", got)
	}
	if got := b.pay(); got != "error card_declined insufficient_funds" {
		t.Fatalf("the shop says %q, want insufficient_funds\n%s", got, b.Page())
	}
	if got := b.text("form-error"); !strings.Contains(got, "insufficient funds") {
		t.Errorf("the frame's form error says %q, want insufficient funds", got)
	}
	b.typeInto("number", cardExpired)
	if got := b.pay(); got != "error card_declined expired_card" {
		t.Fatalf("the shop says %q, want expired_card\n%s", got, b.Page())
	}
	if inv, msg := b.invalid("expiry"), b.text("expiry-error"); inv != "true" || !strings.Contains(msg, "expired") {
		t.Errorf("the expiry field after expired_card: aria-invalid=%q, error %q; want true, expired", inv, msg)
	}
	b.typeInto("number", cardOK)
	if got := b.pay(); got != "succeeded" {
		t.Fatalf("the shop says %q after the good card, want succeeded\n%s", got, b.Page())
	}
	if inv := b.invalid("expiry"); inv != "false" {
		t.Errorf("the expiry field after the success: aria-invalid=%q, want false", inv)
	}
	e.wantPaid(p.ID, "4242")
}

// TestWrongCVCCorrectedInChromium: the simulator declines its
// incorrect_cvc card for the CVC; the frame shows it at the CVC field
// (aria-invalid), the shopper fixes the card and the CVC, the error
// goes, and the payment succeeds.
func TestWrongCVCCorrectedInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(cardWrongCVC, expiryOK, "999")
	if got := b.pay(); got != "error card_declined incorrect_cvc" {
		t.Fatalf("the shop says %q, want incorrect_cvc\n%s", got, b.Page())
	}
	if inv, msg := b.invalid("cvc"), b.text("cvc-error"); inv != "true" || !strings.Contains(msg, "security code is incorrect") {
		t.Errorf("the CVC field: aria-invalid=%q, error %q; want true and the incorrect code", inv, msg)
	}
	if got := b.attr("#cvc", "aria-describedby", b.in()); got != "cvc-error" {
		t.Errorf("the CVC field is described by %q, want cvc-error", got)
	}
	if got := b.text("form-error"); got != "" {
		t.Errorf("an incorrect CVC shows a form error too: %q", got)
	}
	b.Shot("incorrect-cvc")
	// The simulator's trigger is the number: change it, then the CVC.
	b.typeInto("number", cardOK)
	b.typeInto("cvc", cvcOK)
	if inv, msg := b.invalid("cvc"), b.text("cvc-error"); inv != "false" || msg != "" {
		t.Errorf("after the fix the CVC field: aria-invalid=%q, error %q; want false, none", inv, msg)
	}
	if got := b.pay(); got != "succeeded" {
		t.Fatalf("the shop says %q after the fix, want succeeded\n%s", got, b.Page())
	}
	e.wantPaid(p.ID, "4242")
}

// TestInlineValidationInChromium: a number failing Luhn, an expiry in
// the past and a short CVC show their errors at their fields (on blur,
// and on pay), nothing is sent to the API, and each error goes as the
// shopper fixes its field.
func TestInlineValidationInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeInto("number", cardBadLuhn)
	b.typeInto("expiry", "0120") // moving on blurs the number
	if inv, msg := b.invalid("number"), b.text("number-error"); inv != "true" || !strings.Contains(msg, "invalid") {
		t.Errorf("after blur the number field: aria-invalid=%q, error %q; want true, invalid", inv, msg)
	}
	b.typeInto("cvc", "12")
	before := e.hits.prefix("/v1/")
	if got := b.pay(); got != "error incomplete_card" {
		t.Fatalf("the shop says %q, want incomplete_card\n%s", got, b.Page())
	}
	for id, want := range map[string]string{"number": "invalid", "expiry": "in the past", "cvc": "incomplete"} {
		if inv, msg := b.invalid(id), b.text(id+"-error"); inv != "true" || !strings.Contains(msg, want) {
			t.Errorf("#%s: aria-invalid=%q, error %q; want true, %q", id, inv, msg, want)
		}
	}
	b.Shot("invalid")
	if n := e.hits.prefix("/v1/") - before; n != 0 {
		t.Errorf("the invalid card sent %d requests to the API, want none", n)
	}
	if got := e.hits.prefix("/v1/checkout/"); got != 0 {
		t.Errorf("%d checkout requests reached the API, want none", got)
	}
	b.typeInto("number", cardOK)
	if inv, msg := b.invalid("number"), b.text("number-error"); inv != "false" || msg != "" {
		t.Errorf("the fixed number: aria-invalid=%q, error %q; want false, none", inv, msg)
	}
	b.typeInto("expiry", expiryOK)
	b.typeInto("cvc", cvcOK)
	for _, id := range []string{"expiry", "cvc"} {
		if inv := b.invalid(id); inv != "false" {
			t.Errorf("the fixed #%s: aria-invalid=%q, want false", id, inv)
		}
	}
	if got := b.pay(); got != "succeeded" {
		t.Fatalf("the shop says %q after the fixes, want succeeded\n%s", got, b.Page())
	}
}

// TestIsolationInChromium: the shop's page cannot reach into the card
// frame (another origin): contentDocument is null and reading
// contentWindow.document throws, so a script of the page cannot read the
// card number a shopper typed.
func TestIsolationInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(cardOK, expiryOK, cvcOK)
	type probe struct {
		DocNull bool   `json:"docNull"`
		Threw   string `json:"threw"`
		Frames  int    `json:"frames"`
		Read    string `json:"read"`
	}
	got, err := chromedp.Run(b.Ctx, chromedp.Evaluate[probe](`(() => {
		const f = document.querySelector('#card iframe');
		const out = {docNull: f.contentDocument === null, threw: '', frames: window.frames.length, read: ''};
		try { out.read = String(f.contentWindow.document.getElementById('number').value); } catch (e) { out.threw = e.name; }
		try { out.read += String(window.frames[0].document.body.innerHTML); } catch (e) { out.threw += ' ' + e.name; }
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !got.DocNull || got.Threw != "SecurityError SecurityError" || got.Read != "" || got.Frames != 1 {
		t.Errorf("the page's probe of the frame: %+v; want contentDocument null, two SecurityErrors, nothing read", got)
	}
	if seen := b.seen(); strings.Contains(seen, "4242") {
		t.Errorf("the shop's page received card digits:\n%s", seen)
	}
}

// TestOtherOriginRefusedInChromium: a page on an origin the merchant
// does not list cannot mount the frame: its request is refused 403 and
// mount rejects (frame_not_ready); a page that claims a listed origin in
// the frame's URL gets the frame's answer, but Chromium does not render
// it (frame-ancestors): frame.js is never fetched.
func TestOtherOriginRefusedInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.Step("open the other shop", chromedp.Navigate(e.shopURL(e.other, p.ClientSecret)),
		chromedp.WaitReady(chromedp.CSS(`body[data-mounted]`)))
	if got := b.attr("body", "data-mounted"); got != "error frame_not_ready" {
		t.Errorf("mount on the other origin says %q, want error frame_not_ready", got)
	}
	b.Shot("other-origin")
	b.Step("open the lying shop", chromedp.Navigate(e.other+"/?"+"key="+e.pk+"&lie="+e.shop),
		chromedp.WaitReady(chromedp.CSS(`body[data-lie="loaded"]`)))
	b.Step("wait for a late frame", chromedp.Sleep(time.Second))
	if n := e.hits.prefix("/checkout/v1/frame.js"); n != 0 {
		t.Errorf("frame.js was fetched %d times: a frame rendered on an origin not listed", n)
	}
	want := []string{"origin=" + e.other + " 403", "origin=" + e.shop + " 200"}
	if got := e.hits.frameAnswers(); !slices.Equal(got, want) {
		t.Errorf("the frame requests were answered %q, want %q (the mount refused, the lie served but not rendered)", got, want)
	}
	if seen := b.seen(); seen != "" {
		t.Errorf("the lying page received messages:\n%s", seen)
	}
	if got, _ := e.payment(p.ID); got.Status != "requires_payment_method" {
		t.Errorf("the payment is %s, want requires_payment_method", got.Status)
	}
}

// TestClientSecretRefusedInChromium: a client secret with one character
// changed, then one past its expiry, are refused by the API; the frame
// shows a form-level error each time and the payments are untouched.
func TestClientSecretRefusedInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	later := e.newPayment()
	secret := []byte(p.ClientSecret)
	last := len(secret) - 2 // the MAC's last full character
	if secret[last] == 'A' {
		secret[last] = 'B'
	} else {
		secret[last] = 'A'
	}
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, string(secret)))
	b.typeCard(cardOK, expiryOK, cvcOK)
	if got := b.pay(); got != "error client_secret_invalid" {
		t.Fatalf("the shop says %q, want client_secret_invalid\n%s", got, b.Page())
	}
	if got := b.text("form-error"); !strings.Contains(got, "can no longer be completed") {
		t.Errorf("the frame's form error says %q, want the secret's refusal", got)
	}
	b.Shot("secret-invalid")
	if got, _ := e.payment(p.ID); got.Status != "requires_payment_method" {
		t.Errorf("the payment is %s, want requires_payment_method", got.Status)
	}

	e.advance(surgepay.ClientSecretTTL + time.Minute)
	b.open(e.shopURL(e.shop, later.ClientSecret))
	b.typeCard(cardOK, expiryOK, cvcOK)
	if got := b.pay(); got != "error client_secret_expired" {
		t.Fatalf("the shop says %q, want client_secret_expired\n%s", got, b.Page())
	}
	if got := b.text("form-error"); !strings.Contains(got, "can no longer be completed") {
		t.Errorf("the frame's form error says %q, want the secret's refusal", got)
	}
	if got, _ := e.payment(later.ID); got.Status != "requires_payment_method" {
		t.Errorf("the payment is %s, want requires_payment_method", got.Status)
	}
}

// TestConfirmAnswerLostInChromium: the network loses the confirm's
// answer after surgepay charged the card. The frame does not send the
// confirm again: it reads the payment with the client secret and the
// shop learns it succeeded. Any resend was the browser's own, under the
// same Idempotency-Key, and replayed: one charge.
func TestConfirmAnswerLostInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(cardOK, expiryOK, cvcOK)
	e.loseConfirms.Store(true)
	if got := b.pay(); got != "succeeded" {
		t.Fatalf("the shop says %q, want succeeded (read after the lost answer)\n%s", got, b.Page())
	}
	keys := e.hits.confirmKeys()
	t.Logf("Chromium sent the confirm %d time(s)", len(keys))
	if len(keys) == 0 || keys[0] == "" {
		t.Fatalf("confirms with Idempotency-Keys %q, want at least one, with a key", keys)
	}
	for _, k := range keys[1:] {
		if k != keys[0] {
			t.Errorf("confirms with Idempotency-Keys %q: a confirm was sent again as a new request", keys)
		}
	}
	for _, status := range e.hits.lostAnswers() {
		if status != 200 {
			t.Errorf("the lost answers had statuses %v, want 200 each (a resend is a replay)", e.hits.lostAnswers())
			break
		}
	}
	if n := e.hits.prefix("/v1/checkout/payments/" + p.ID); n != len(keys)+1 {
		t.Errorf("%d requests for the payment, want the %d confirm(s) and one read", n, len(keys))
	}
	e.wantPaid(p.ID, "4242")
}

// TestConfirmInProgressInChromium: a second confirmPayment while one
// runs is refused at once (confirm_in_progress) and sends nothing; the
// first goes on and succeeds.
func TestConfirmInProgressInChromium(t *testing.T) {
	e := newEnv(t)
	p := e.newPayment()
	b := newBrowser(t)
	b.open(e.shopURL(e.shop, p.ClientSecret))
	b.typeCard(cardOK, expiryOK, cvcOK)
	got, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`(async () => {
		const first = shop.sp.confirmPayment(shop.secret, {card: shop.card});
		let second = 'resolved';
		try { await shop.sp.confirmPayment(shop.secret, {card: shop.card}); } catch (e) { second = e.code; }
		const r = await first;
		return second + ' ' + (r.error ? 'error ' + r.error.code : r.payment.status);
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || got != "confirm_in_progress succeeded" {
		t.Fatalf("two confirms at once: %q (%v), want confirm_in_progress for the second, the first succeeded", got, err)
	}
	if keys := e.hits.confirmKeys(); len(keys) != 1 {
		t.Errorf("%d confirms reached the API, want 1", len(keys))
	}
	e.wantPaid(p.ID, "4242")
}
