package console_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
)

// browser is a headless Chromium visiting an env's admin listener, as
// an operator would (testenv.Browser; screenshots console-NAME.png).
type browser struct {
	*testenv.Browser
	base string
}

// newBrowser starts Chromium for the test (skipped without one, outside
// CI), stopped when the test ends.
func newBrowser(t *testing.T, e *env) *browser {
	t.Helper()
	return &browser{Browser: testenv.NewBrowser(t, "the console's browser test", "console-", 1280, 900), base: e.base}
}

// text returns the text of the element with id.
func (b *browser) text(id string) string {
	b.T.Helper()
	got, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		b.T.Fatalf("the text of #%s: %v\n%s", id, err, b.Page())
	}
	return got
}

// count returns how many elements of the page match a CSS selector.
func (b *browser) count(css string) int {
	b.T.Helper()
	n, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(css)+`).length`))
	if err != nil {
		b.T.Fatalf("count %s: %v", css, err)
	}
	return n
}

// jsString quotes s for a script: the tests' own selectors, never input.
func jsString(s string) string { return "`" + strings.ReplaceAll(s, "`", "\\`") + "`" }

// login logs in through the login page a browser is sent to, with token.
func (b *browser) login(token string) {
	b.T.Helper()
	b.Step("log in", chromedp.Navigate(b.base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("search")))
}

// TestSearchPaymentRefundInChromium: in a real headless Chromium, as an
// operator would: log in, search by the customer's email, open the
// payment, refund part of it through the confirmation, and see the
// refund on the payment's page, in its timeline, in its webhook
// deliveries and in the operators' actions; then resend the refund's
// webhook delivery through its confirmation and see the resend on the
// page and in the audit trail.
func TestSearchPaymentRefundInChromium(t *testing.T) {
	e := newEnv(t)
	ep, _, err := e.eng.CreateWebhookEndpoint(context.Background(), e.call, &engine.WebhookEndpointInput{URL: "http://127.0.0.1:9/hooks"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, e)
	b := newBrowser(t, e)

	b.login(testToken)
	b.Step("search by email", chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "zoe@example.com"),
		chromedp.Click(chromedp.ID("search")), chromedp.WaitVisible(chromedp.ID("results")))
	b.Shot("search")
	b.Step("open the payment", chromedp.Click(chromedp.CSS(`#results a[href$="`+f.sale.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("payment-id")))
	if n := b.count(`#deliveries tr`); n != 2 || !strings.Contains(b.text("deliveries"), surgepay.WebhookPaymentSucceeded) {
		t.Fatalf("before the refund the deliveries show %d rows: %q; want the sale's one", n-1, b.text("deliveries"))
	}
	b.Step("ask to refund 3.00", chromedp.SendKeys(chromedp.ID("refund-amount"), "300"),
		chromedp.Click(chromedp.ID("refund")), chromedp.WaitVisible(chromedp.ID("confirm")))
	if what := b.text("what"); !strings.Contains(what, "3.00 EUR") {
		t.Fatalf("the confirmation says %q, want the refund of 3.00 EUR", what)
	}
	b.Shot("confirm")
	b.Step("confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("notice")))
	b.Shot("payment")
	for id, want := range map[string]string{"refunded": "3.00 EUR", "status": "partially_refunded"} {
		if got := b.text(id); strings.TrimSpace(got) != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	for id, want := range map[string]string{"timeline": "succeeded → partially_refunded", "audit": "console:token",
		"deliveries": surgepay.WebhookPaymentRefunded} {
		if got := b.text(id); !strings.Contains(got, want) {
			t.Errorf("#%s does not show %q: %q", id, want, got)
		}
	}

	// Resend the refund's webhook delivery: its row's link, the
	// confirmation, and the page again with the resend counted.
	refundRow := `//table[@id="deliveries"]//tr[contains(., "` + surgepay.WebhookPaymentRefunded + `")]`
	b.Step("ask to resend the refund's delivery", chromedp.Click(chromedp.Search(refundRow+`//a[@class="resend"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	if h1, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS("h1"))); err != nil || !strings.Contains(h1, "Resend a webhook delivery") {
		t.Fatalf("the resend's confirmation says %q (%v)", h1, err)
	}
	b.Shot("resend-confirm")
	b.Step("confirm the resend", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("notice")))
	if got := b.text("notice"); !strings.Contains(got, "queued again") {
		t.Errorf("after the resend the notice says %q, want the delivery queued again", got)
	}
	resent, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.Search(refundRow+`/td[7]`)))
	if err != nil || strings.TrimSpace(resent) != "1" {
		t.Errorf("the refund's delivery shows %q resends (%v), want 1", resent, err)
	}
	if got := b.text("audit"); !strings.Contains(got, surgepay.AuditWebhookResent) {
		t.Errorf("the operators' actions do not show the resend: %q", got)
	}

	// The operations views: from the navigation to the audit trail,
	// filtered by the action, and back to the payment.
	b.Step("open the audit trail", chromedp.Click(chromedp.CSS(`#nav a[href="/console/audit"]`)),
		chromedp.WaitVisible(chromedp.ID("filter")))
	b.Step("filter by refunds", chromedp.SetValue(chromedp.CSS(`select[name=action]`), surgepay.AuditPaymentRefunded),
		chromedp.Click(chromedp.ID("filter")), // the filtered page is the one whose option is selected by the server
		chromedp.WaitReady(chromedp.CSS(`option[value="`+surgepay.AuditPaymentRefunded+`"][selected]`)),
		chromedp.WaitVisible(chromedp.ID("audit")))
	rows := b.text("audit")
	if !strings.Contains(rows, "console:token") || !strings.Contains(rows, "amount=300") ||
		strings.Contains(rows, surgepay.AuditMerchantCreated) || strings.Contains(rows, surgepay.AuditWebhookResent) {
		t.Errorf("the audit trail filtered by refunds shows %q, want the refund of 300 alone", rows)
	}
	b.Shot("audit")
	b.Step("back to the payment", chromedp.Click(chromedp.CSS(`#audit a[href$="`+f.sale.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("payment-id")))
	cookie, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || strings.Contains(cookie, console.CSRFCookie) {
		t.Errorf("document.cookie = %q (%v): the CSRF cookie is readable by scripts, want HttpOnly", cookie, err)
	}
	if p := e.payment(f.sale.ID); p.AmountRefunded != 300 || p.Status != surgepay.StatusPartiallyRefunded {
		t.Fatalf("after the refund in the browser: refunded %d, %s; want 300, partially_refunded", p.AmountRefunded, p.Status)
	}
	ds, _, err := e.eng.ListWebhookDeliveries(context.Background(), e.call, surgepay.WebhookDeliveryFilter{EndpointID: ep.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	resends := map[string]int{}
	for _, d := range ds {
		resends[d.Type] += d.Resends
	}
	if resends[surgepay.WebhookPaymentRefunded] != 1 || resends[surgepay.WebhookPaymentSucceeded] != 0 {
		t.Errorf("resends by event type after the browser's resend: %v, want the refund's delivery resent once", resends)
	}
}

// TestSearchEachFieldInChromium: in headless Chromium, the search form
// finds a payment by each of its fields, typed (or chosen) as a person
// would, one search at a time from an empty form: what the search must
// find is in the results, what it must not is not.
func TestSearchEachFieldInChromium(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	b := newBrowser(t, e)
	b.login(testToken)
	day := time.Now().UTC().Format("2006-01-02")
	type field struct{ name, value string }
	tests := []struct {
		name    string
		fields  []field
		want    []*surgepay.Payment
		notWant []*surgepay.Payment
	}{
		{"PaymentID", []field{{"payment", f.auth.ID}}, []*surgepay.Payment{f.auth}, []*surgepay.Payment{f.sale, f.mc1}},
		{"CustomerID", []field{{"customer", f.ann.ID}}, []*surgepay.Payment{f.mc1}, []*surgepay.Payment{f.sale, f.auth}},
		{"Email", []field{{"email", "ZOE@example.com"}}, []*surgepay.Payment{f.sale, f.auth}, []*surgepay.Payment{f.mc1}},
		{"Last4", []field{{"last4", "4444"}}, []*surgepay.Payment{f.mc1}, []*surgepay.Payment{f.sale, f.auth}},
		{"IdempotencyKey", []field{{"idempotency_key", "order-1250-zoe"}}, []*surgepay.Payment{f.sale}, []*surgepay.Payment{f.auth, f.mc1}},
		{"ProcessorRef", []field{{"ref", f.mc1.AuthorizationRef}}, []*surgepay.Payment{f.mc1}, []*surgepay.Payment{f.sale, f.auth}},
		{"Status", []field{{"status", string(surgepay.StatusRequiresCapture)}}, []*surgepay.Payment{f.auth}, []*surgepay.Payment{f.sale, f.mc1}},
		{"AmountRange", []field{{"amount_min", "700"}, {"amount_max", "1000"}}, []*surgepay.Payment{f.mc1}, []*surgepay.Payment{f.sale, f.auth}},
		{"DateRange", []field{{"from", day}, {"to", day}}, []*surgepay.Payment{f.sale, f.auth, f.mc1}, []*surgepay.Payment{f.other}},
		{"DateRangeBefore", []field{{"from", "2001-01-01"}, {"to", "2001-01-02"}}, nil, []*surgepay.Payment{f.sale, f.auth, f.mc1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b.T = t
			actions := []chromedp.Action[chromedp.Void]{chromedp.Navigate(b.base + "/console/"), chromedp.WaitVisible(chromedp.ID("search")),
				chromedp.SetValue(chromedp.CSS(`select[name=merchant]`), e.merchant.ID)}
			for _, fl := range tc.fields {
				if fl.name == "status" {
					actions = append(actions, chromedp.SetValue(chromedp.CSS(`select[name=status]`), fl.value))
				} else {
					actions = append(actions, chromedp.SendKeys(chromedp.CSS(`input[name=`+fl.name+`]`), fl.value))
				}
			}
			// A fresh form has neither results nor "No payment found":
			// the one that appears is this search's answer.
			actions = append(actions, chromedp.Click(chromedp.ID("search")), chromedp.WaitVisible(chromedp.CSS(`#results, #none`)))
			b.Step("search by "+tc.name, actions...)
			links, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]string](
				`Array.from(document.querySelectorAll("#results a")).map(a => a.getAttribute("href"))`))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.want {
				if !slices.Contains(links, paymentPath(p)) {
					t.Errorf("payment %s (%d) not found: results %v\n%s", p.ID, p.Amount, links, b.Page())
				}
			}
			for _, p := range tc.notWant {
				if slices.Contains(links, paymentPath(p)) {
					t.Errorf("payment %s (%d) found: results %v", p.ID, p.Amount, links)
				}
			}
			if len(tc.want) == 0 && b.count("#none") != 1 {
				t.Errorf("no 'No payment found': %s", b.Page())
			}
			for _, fl := range tc.fields { // the answer's form says what was searched
				got, err := chromedp.Run(b.Ctx, chromedp.Value(chromedp.CSS(`[name=`+fl.name+`]`)))
				if err != nil || got != fl.value {
					t.Errorf("the answer's %s field holds %q (%v), want %q", fl.name, got, err, fl.value)
				}
			}
		})
	}
	b.T = t
	b.Shot("search-fields")
}

// apiListener serves the API of e's engine on 127.0.0.1 until the test
// ends, and returns its address.
func apiListener(t *testing.T, e *env) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.New(api.Config{Engine: e.eng}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// apiGet calls the API with an API key and returns the status and body.
func apiGet(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestRevokeKeyInChromium: an operator revokes an API key on its
// merchant's page in headless Chromium, through the confirmation, and
// the next call to the API listener with that key is refused 401 (it
// answered 200 just before); the merchant's other key still works.
func TestRevokeKeyInChromium(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	base := apiListener(t, e)
	secret, k, err := e.eng.CreateAPIKey(context.Background(), e.merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	otherSecret, _, err := e.eng.CreateAPIKey(context.Background(), e.merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := apiGet(t, base+"/v1/payments/"+f.sale.ID, secret); code != http.StatusOK {
		t.Fatalf("GET the payment with the key before the revoke = %d, want 200: %s", code, body)
	}
	b := newBrowser(t, e)
	b.login(testToken)
	b.Step("open the merchants", chromedp.Click(chromedp.CSS(`#nav a[href="/console/merchants"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/merchants/`+e.merchant.ID+`"]`)))
	b.Step("open the merchant", chromedp.Click(chromedp.CSS(`a[href="/console/merchants/`+e.merchant.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("keys")))
	row := `//table[@id="keys"]//tr[contains(., "` + k.ID + `")]`
	b.Step("ask to revoke the key", chromedp.Click(chromedp.Search(row+`//a[@class="revoke"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	if what := b.text("what"); !strings.Contains(what, "Revoke the key for good") {
		t.Fatalf("the confirmation says %q, want the revoke", what)
	}
	b.Step("confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("notice")))
	b.Shot("revoked")
	if got := b.text("notice"); !strings.Contains(got, "revoked") {
		t.Errorf("the notice says %q, want the key revoked", got)
	}
	if got, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.Search(row+`/td[7]`))); err != nil || strings.TrimSpace(got) != "revoked" {
		t.Errorf("the key's row says %q (%v) in Revoked, want revoked", got, err)
	}
	code, body := apiGet(t, base+"/v1/payments/"+f.sale.ID, secret)
	if code != http.StatusUnauthorized || strings.Contains(body, f.sale.ID) {
		t.Errorf("GET the payment with the revoked key = %d, want 401: %s", code, body)
	}
	if code, body := apiGet(t, base+"/v1/payments/"+f.sale.ID, otherSecret); code != http.StatusOK {
		t.Errorf("GET the payment with the merchant's other key = %d, want 200: %s", code, body)
	}
	if rows := e.auditActors()[surgepay.AuditAPIKeyRevoked]; len(rows) != 1 || rows[0] != "console:token" {
		t.Errorf("api_key.revoked audit rows by %v, want one by console:token", rows)
	}
}

// TestReadOnlyOperatorInChromium: an operator logged in through the
// login page with the read-only token finds a payment and reads its
// page, with its deliveries, but sees no action there nor on its
// merchant's page, and the page says so; an action's confirmation
// reached by its address is refused 403, and nothing is done.
func TestReadOnlyOperatorInChromium(t *testing.T) {
	e := newEnv(t)
	f, k := readOnlyFixture(t, e)
	b := newBrowser(t, e)
	b.login(testReadToken)
	b.Step("search by email", chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "zoe@example.com"),
		chromedp.Click(chromedp.ID("search")), chromedp.WaitVisible(chromedp.ID("results")))
	b.Step("open the authorization", chromedp.Click(chromedp.CSS(`#results a[href$="`+f.auth.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("payment-id")))
	b.Shot("readonly")
	if got := b.text("read-only"); !strings.Contains(got, console.ReadOnlyNotice) {
		t.Errorf("#read-only says %q, want %q", got, console.ReadOnlyNotice)
	}
	if n := b.count(`#deliveries tbody tr`); n == 0 || !strings.Contains(b.text("deliveries"), surgepay.WebhookPaymentAuthorized) {
		t.Errorf("the read-only page lists %d deliveries: %q; want the authorization's", n, b.text("deliveries"))
	}
	for _, css := range []string{`#actions form`, `#actions button`, `#actions input`, `a.resend`, `main form`, `#capture`, `#void`, `#refund`} {
		if n := b.count(css); n != 0 {
			t.Errorf("the read-only payment page has %d %s, want none", n, css)
		}
	}
	b.Step("open the merchants", chromedp.Click(chromedp.CSS(`#nav a[href="/console/merchants"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/merchants/`+e.merchant.ID+`"]`)))
	b.Step("open the merchant", chromedp.Click(chromedp.CSS(`a[href="/console/merchants/`+e.merchant.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("keys")))
	if !strings.Contains(b.text("keys"), k.ID) || !strings.Contains(b.text("read-only"), console.ReadOnlyNotice) {
		t.Errorf("the read-only merchant page lacks the key %s or the notice", k.ID)
	}
	for _, css := range []string{`#create`, `a.revoke`, `main form`, `main button`} {
		if n := b.count(css); n != 0 {
			t.Errorf("the read-only merchant page has %d %s, want none", n, css)
		}
	}
	for _, p := range []string{paymentPath(f.auth) + "/capture", paymentPath(f.auth) + "/void",
		merchantKeys(e.merchant.ID) + "/" + k.ID + "/revoke"} {
		res, err := chromedp.Run(b.Ctx, chromedp.NavigateResponse(b.base+p))
		if err != nil {
			t.Fatalf("visit %s: %v", p, err)
		}
		// The page as it is, without waiting for an element that a
		// wrong answer would not have.
		body, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil || res.Status != http.StatusForbidden || !strings.Contains(body, console.ReadOnlyNotice) || b.count(`#confirm`) != 0 {
			t.Errorf("a read-only visit to %s: %d (%v), want 403 saying %q, no confirm button:\n%s", p, res.Status, err, console.ReadOnlyNotice, body)
		}
	}
	b.Shot("readonly-refused")
	if p := e.payment(f.auth.ID); p.Status != surgepay.StatusRequiresCapture {
		t.Errorf("the authorization is %s after the read-only visit, want requires_capture", p.Status)
	}
}

// TestDisputesInChromium: a sale the simulator's cardholder disputes; as
// an operator would, choose "needs_response" in the search page's
// dispute state, see the dispute by its deadline on the disputes page,
// and open its payment from there.
func TestDisputesInChromium(t *testing.T) {
	e, applied := newSimDisputesEnv(t)
	c := e.customer("Dee", "dee@example.com")
	sale := disputedSale(t, e, applied, c, e.card(c.ID, "4242424242424242", "123"))
	ds := e.payment(sale.ID).Disputes()
	if len(ds) != 1 {
		t.Fatalf("the sale's disputes: %+v, want one", ds)
	}
	b := newBrowser(t, e)
	b.login(testToken)
	b.Step("search by dispute state", chromedp.SetValue(chromedp.ID("dispute-state"), surgepay.DisputeNeedsResponse),
		chromedp.Click(chromedp.ID("search-disputes")), chromedp.WaitVisible(chromedp.ID("disputes")))
	b.Shot("disputes")
	row := b.text("disputes")
	for _, want := range []string{sale.ID, ds[0].ID, "fraudulent", surgepay.DisputeNeedsResponse, "91.05 EUR",
		ds[0].DueBy.UTC().Format("2006-01-02 15:04:05 UTC")} {
		if !strings.Contains(row, want) {
			t.Errorf("the disputes page lacks %q:\n%s", want, row)
		}
	}
	b.Step("open the disputed payment", chromedp.Click(chromedp.CSS(`#disputes a[href$="`+sale.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("payment-id")))
	if got := b.text("payment-id"); got != sale.ID {
		t.Errorf("the disputes page's link opened %q, want %s", got, sale.ID)
	}
}
