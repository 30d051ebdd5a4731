package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

func TestConsoleNeedsAdminCredential(t *testing.T) {
	e := newEnv(t)
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"ErrNoCredential", nil, http.StatusUnauthorized},
		{"BrowserSentToLogin", map[string]string{"Accept": "text/html"}, http.StatusSeeOther},
		{"ErrWrongToken", map[string]string{"Authorization": "Bearer wrong-token-0123456789"}, http.StatusUnauthorized},
		{"OKToken", map[string]string{"Authorization": "Bearer " + testToken}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", e.base+"/console/", nil)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			res, err := anon.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("GET /console/ = %d, want %d", res.StatusCode, tc.want)
			}
			if tc.want == http.StatusSeeOther && res.Header.Get("Location") != "/login?next=%2Fconsole%2F" {
				t.Fatalf("sent to %q, want the login page", res.Header.Get("Location"))
			}
		})
	}
}

func TestConsoleHeadersAndAssets(t *testing.T) {
	e := newEnv(t)
	code, body, h := e.do("GET", "/console/", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /console/ = %d", code)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "style-src 'self'", "form-action 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src") || strings.Contains(strings.ToLower(body), "<script") {
		t.Errorf("the console runs no script: CSP %q; a <script> in the page: %v", csp, strings.Contains(body, "<script"))
	}
	for k, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	code, css, h := e.do("GET", "/console/static/console.css", nil, nil)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/css") || !strings.Contains(css, "body{") {
		t.Fatalf("GET console.css = %d %q", code, h.Get("Content-Type"))
	}
	e.get("/console/no/such/page", http.StatusNotFound)
}

// fixture is a few payments of two customers and a second merchant.
type fixture struct {
	zoe, ann        *surgepay.Customer
	visa, mc        *surgepay.PaymentMethod
	sale, auth, mc1 *surgepay.Payment
	other           *surgepay.Payment // another merchant's
}

func newFixture(t *testing.T, e *env) *fixture {
	f := &fixture{}
	f.zoe = e.customer("Zoë <script>alert(1)</script>", "zoe@example.com")
	f.ann = e.customer("Ann", "ann@example.com")
	f.visa = e.card(f.zoe.ID, "4242424242424242", "987")
	f.mc = e.card(f.ann.ID, "5555555555554444", "654")
	f.sale = e.pay(f.zoe, f.visa, 1250, false, "order-1250-zoe")
	f.auth = e.pay(f.zoe, f.visa, 4000, true, "")
	f.mc1 = e.pay(f.ann, f.mc, 777, false, "")
	m2, err := e.eng.CreateMerchant(context.Background(), "Other")
	if err != nil {
		t.Fatal(err)
	}
	call := &engine.Call{MerchantID: m2.ID}
	c, _ := e.eng.CreateCustomer(context.Background(), call, &engine.CustomerInput{Email: "zoe@example.com"})
	pm, err := e.eng.CreatePaymentMethod(context.Background(), call, &engine.CardInput{CustomerID: c.ID,
		Card: surgepay.CardInput{Number: "4242424242424242", ExpMonth: 1, ExpYear: time.Now().Year() + 2, CVC: "111"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.other, err = e.eng.CreatePayment(context.Background(), call, &engine.PaymentInput{Amount: 1250, Currency: "eur",
		CustomerID: c.ID, PaymentMethodID: pm.ID}); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSearchByEachField(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	m := "merchant=" + e.merchant.ID + "&"
	day := time.Now().UTC().Format("2006-01-02")
	tests := []struct {
		name    string
		query   string
		want    []*surgepay.Payment
		notWant []*surgepay.Payment
	}{
		{"PaymentID", m + "payment=" + f.auth.ID, []*surgepay.Payment{f.auth}, []*surgepay.Payment{f.sale, f.mc1}},
		{"PaymentIDAllMerchants", "payment=" + f.other.ID, []*surgepay.Payment{f.other}, []*surgepay.Payment{f.sale}},
		{"CustomerID", m + "customer=" + f.zoe.ID, []*surgepay.Payment{f.sale, f.auth}, []*surgepay.Payment{f.mc1}},
		{"Email", m + "email=ZOE@example.com", []*surgepay.Payment{f.sale, f.auth}, []*surgepay.Payment{f.mc1, f.other}},
		{"EmailAllMerchants", "email=zoe@example.com", []*surgepay.Payment{f.sale, f.auth, f.other}, []*surgepay.Payment{f.mc1}},
		{"Last4", m + "last4=4444", []*surgepay.Payment{f.mc1}, []*surgepay.Payment{f.sale, f.auth}},
		{"IdempotencyKey", m + "idempotency_key=order-1250-zoe", []*surgepay.Payment{f.sale}, []*surgepay.Payment{f.auth}},
		{"ProcessorRef", m + "ref=" + url.QueryEscape(f.auth.AuthorizationRef), []*surgepay.Payment{f.auth}, []*surgepay.Payment{f.sale}},
		{"Status", m + "status=requires_capture", []*surgepay.Payment{f.auth}, []*surgepay.Payment{f.sale, f.mc1}},
		{"AmountRange", m + "amount_min=700&amount_max=1300", []*surgepay.Payment{f.sale, f.mc1}, []*surgepay.Payment{f.auth}},
		{"DateRange", m + "from=" + day + "&to=" + day, []*surgepay.Payment{f.sale, f.auth, f.mc1}, []*surgepay.Payment{f.other}},
		{"DateRangeBefore", m + "to=2001-01-01", nil, []*surgepay.Payment{f.sale, f.auth, f.mc1}},
		{"NewestOfMerchant", m, []*surgepay.Payment{f.sale, f.auth, f.mc1}, []*surgepay.Payment{f.other}},
		{"AllMerchants", "status=succeeded", []*surgepay.Payment{f.sale, f.mc1, f.other}, []*surgepay.Payment{f.auth}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := e.get("/console/?"+tc.query, http.StatusOK)
			for _, p := range tc.want {
				if !strings.Contains(body, paymentPath(p)) {
					t.Errorf("?%s: payment %s (%d) not listed", tc.query, p.ID, p.Amount)
				}
			}
			for _, p := range tc.notWant {
				if strings.Contains(body, paymentPath(p)) {
					t.Errorf("?%s: payment %s (%d) listed", tc.query, p.ID, p.Amount)
				}
			}
			if len(tc.want) == 0 && !strings.Contains(body, `id="none"`) {
				t.Errorf("?%s: no 'No payment found'", tc.query)
			}
		})
	}
}

func TestSearchPages(t *testing.T) {
	e := newEnv(t)
	c := e.customer("Pat", "pat@example.com")
	pm := e.card(c.ID, "4242424242424242", "123")
	var ids []string
	for i := range 5 {
		ids = append(ids, e.pay(c, pm, int64(100+i), false, "").ID)
	}
	seen := map[string]bool{}
	next := "/console/?merchant=" + e.merchant.ID + "&limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 2 for 5 payments")
		}
		body := e.get(next, http.StatusOK)
		for _, id := range ids {
			if strings.Contains(body, "/payments/"+id+`"`) {
				if seen[id] {
					t.Fatalf("payment %s on two pages", id)
				}
				seen[id] = true
			}
		}
		next = ""
		if i := strings.Index(body, `id="older" href="`); i >= 0 {
			rest := body[i+len(`id="older" href="`):]
			next = strings.ReplaceAll(rest[:strings.IndexByte(rest, '"')], "&amp;", "&")
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("the pages listed %d of %d payments", len(seen), len(ids))
	}
}

// TestSearchBadInput: every malformed field is a 400 page that names the
// field, never a 500; a card number typed into a field is not shown back.
func TestSearchBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ query, field string }{
		{"last4=42", "last4"},
		{"last4=abcd", "last4"},
		{"status=paid", "status"},
		{"amount_min=-5", "amount_min"},
		{"amount_max=1.50", "amount_max"},
		{"amount_min=900&amount_max=100", "amount_max"},
		{"from=yesterday", "from"},
		{"to=2026-13-45", "to"},
		{"from=2026-03-02&to=2026-03-01", "to"},
		{"after=cus_1", "after"},
		{"limit=0", "limit"},
		{"limit=1000", "limit"},
		{"merchant=mer_nope", "merchant"},
		{"email=" + strings.Repeat("a", 300), "email"},
		{"ref=a%00b", "ref"},
		{"customer=a%E2%80%AEb", "customer"},
		{"payment=a&payment=b", "payment"},
		{"email=4242424242424242", "email"},
		{"ref=4242-4242-4242-4242", "ref"},
		{"%zz", "query"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			body := e.get("/console/?"+tc.query, http.StatusBadRequest)
			if !strings.Contains(body, "Field <code>"+tc.field+"</code>") {
				t.Fatalf("?%s: the 400 page does not name %s:\n%s", tc.query, tc.field, body)
			}
			if surgepay.TextHasCardNumber(body) {
				t.Fatalf("?%s: the page shows a card number back", tc.query)
			}
		})
	}
	e.get("/console/merchants/"+e.merchant.ID+"/payments/pay_nope", http.StatusNotFound)
	e.get("/console/merchants/mer_nope/payments/pay_nope", http.StatusNotFound)
}

// TestPagesShowNoCardData: the search, the payment's page and the
// confirmation pages show a card by brand and last 4 only, never its
// number or CVC, and escape what merchants and customers wrote.
func TestPagesShowNoCardData(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	pages := map[string]string{
		"search":  e.get("/console/?merchant="+e.merchant.ID+"&email=zoe@example.com", http.StatusOK),
		"payment": e.get(paymentPath(f.sale), http.StatusOK),
		"refund":  e.get(paymentPath(f.sale)+"/refund?amount=100", http.StatusOK),
		"capture": e.get(paymentPath(f.auth)+"/capture", http.StatusOK),
	}
	for name, body := range pages {
		if surgepay.TextHasCardNumber(body) || strings.Contains(body, "4242424242424242") {
			t.Errorf("%s page shows a card number", name)
		}
		for _, cvc := range []string{">987<", " 987 ", "cvc", "CVC"} {
			if strings.Contains(body, cvc) {
				t.Errorf("%s page shows %q", name, cvc)
			}
		}
		for _, raw := range []string{"<script>alert", "<img src=x", "<b>&amp;</b>", "<i>O'Brien"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s page has %q unescaped", name, raw)
			}
		}
	}
	if !strings.Contains(pages["payment"], "visa •••• 4242") {
		t.Errorf("the payment's page does not show the card as brand and last 4:\n%s", pages["payment"])
	}
}

func TestPaymentPage(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	if _, err := e.eng.RefundPayment(context.Background(), e.call, f.sale.ID, 250); err != nil {
		t.Fatal(err)
	}
	body := e.get(paymentPath(f.sale), http.StatusOK)
	for _, want := range []string{
		`<dd id="authorized">12.50 EUR</dd>`, `<dd id="captured">12.50 EUR</dd>`, `<dd id="refunded">2.50 EUR</dd>`,
		f.sale.AuthorizationRef, `id="processor">default provider<`, "zoe@example.com", "partially_refunded",
		"authorization", "refund", "succeeded → partially_refunded", `id="refund"`, "key_test",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the payment's page lacks %q", want)
		}
	}
	auth := e.get(paymentPath(f.auth), http.StatusOK)
	for _, want := range []string{`id="capture"`, `id="void"`} {
		if !strings.Contains(auth, want) {
			t.Errorf("an authorization's page lacks %q", want)
		}
	}
	// A payment of another merchant is not found under this one.
	e.get("/console/merchants/"+e.merchant.ID+"/payments/"+f.other.ID, http.StatusNotFound)
}

// act confirms an action on the page at path (GET, then POST of its
// form) and returns where the browser was sent and the form used.
func (e *env) act(path string) (string, url.Values) {
	e.t.Helper()
	form := confirmForm(e.t, e.get(path, http.StatusOK))
	action := path
	if i := strings.IndexByte(action, '?'); i >= 0 {
		action = action[:i]
	}
	code, body, h := e.do("POST", action, form, nil)
	if code != http.StatusSeeOther {
		e.t.Fatalf("POST %s = %d, want 303; body:\n%s", action, code, body)
	}
	return h.Get("Location"), form
}

// TestRefundOnceOnDoubleSubmit: a partial refund confirmed twice with
// the same form acts once, and is in the audit trail with the operator.
func TestRefundOnceOnDoubleSubmit(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	loc, form := e.act(paymentPath(f.sale) + "/refund?amount=300")
	if loc != paymentPath(f.sale)+"?done=refunded" {
		t.Fatalf("sent to %q, want the payment's page with done=refunded", loc)
	}
	code, _, h := e.do("POST", paymentPath(f.sale)+"/refund", form, nil)
	if code != http.StatusSeeOther || h.Get("Location") != paymentPath(f.sale)+"?done=replayed" {
		t.Fatalf("the same form again: %d to %q, want 303 to done=replayed", code, h.Get("Location"))
	}
	p := e.payment(f.sale.ID)
	if p.AmountRefunded != 300 || p.RefundCount() != 1 || p.Status != surgepay.StatusPartiallyRefunded {
		t.Fatalf("after a double submit: refunded %d in %d refunds, status %s; want 300 in 1, partially_refunded",
			p.AmountRefunded, p.RefundCount(), p.Status)
	}
	// The same key with another amount is refused, not acted on.
	form.Set("amount", "400")
	code, _, h = e.do("POST", paymentPath(f.sale)+"/refund", form, nil)
	if code != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), "?done=duplicate") {
		t.Fatalf("the key with another amount: %d to %q, want done=duplicate", code, h.Get("Location"))
	}
	if p := e.payment(f.sale.ID); p.AmountRefunded != 300 {
		t.Fatalf("refunded %d after the key was reused, want 300", p.AmountRefunded)
	}
	audit, _, err := e.eng.ListAuditEvents(context.Background(), surgepay.AuditFilter{ObjectID: f.sale.ID, Page: surgepay.Page{Limit: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Action != surgepay.AuditPaymentRefunded || audit[0].Actor != "console:token" ||
		!strings.Contains(audit[0].Detail, "amount=300") {
		t.Fatalf("audit rows of the payment = %+v, want one payment.refunded by console:token of 300", audit)
	}
	body := e.get(loc, http.StatusOK)
	for _, want := range []string{`id="notice"`, "payment.refunded", "console:token", `<dd id="refunded">3.00 EUR</dd>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the payment's page after the refund lacks %q", want)
		}
	}
	// A full refund of what is left.
	if loc, _ := e.act(paymentPath(f.sale) + "/refund"); !strings.HasSuffix(loc, "?done=refunded") {
		t.Fatalf("full refund sent to %q", loc)
	}
	if p := e.payment(f.sale.ID); p.Status != surgepay.StatusRefunded || p.AmountRefunded != 1250 {
		t.Fatalf("after the full refund: %s, refunded %d; want refunded 1250", p.Status, p.AmountRefunded)
	}
}

func TestCaptureAndVoid(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	if loc, _ := e.act(paymentPath(f.auth) + "/capture?amount=3000"); !strings.HasSuffix(loc, "?done=captured") {
		t.Fatalf("capture sent to %q", loc)
	}
	if p := e.payment(f.auth.ID); p.Status != surgepay.StatusSucceeded || p.AmountCaptured != 3000 {
		t.Fatalf("after a partial capture: %s, captured %d; want succeeded, 3000", p.Status, p.AmountCaptured)
	}
	auth := e.pay(f.zoe, f.visa, 900, true, "")
	if loc, _ := e.act(paymentPath(auth) + "/void"); !strings.HasSuffix(loc, "?done=voided") {
		t.Fatalf("void sent to %q", loc)
	}
	if p := e.payment(auth.ID); p.Status != surgepay.StatusCanceled {
		t.Fatalf("after a void: %s, want canceled", p.Status)
	}
	// What the state machine refuses is refused before a form is shown,
	// and an amount over what is left names the amount.
	e.get(paymentPath(auth)+"/capture", http.StatusConflict)
	e.get(paymentPath(f.sale)+"/refund?amount=99999", http.StatusUnprocessableEntity)
	body := e.get(paymentPath(f.sale)+"/refund?amount=12x", http.StatusBadRequest)
	if !strings.Contains(body, "amount") {
		t.Fatalf("a malformed amount's page does not name amount:\n%s", body)
	}
	e.get(paymentPath(f.sale)+"/explode", http.StatusNotFound)
}

// TestActionsNeedCSRFToken: a POST without the form's token, with
// another token, or from another site acts not.
func TestActionsNeedCSRFToken(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	form := confirmForm(t, e.get(paymentPath(f.sale)+"/refund?amount=100", http.StatusOK))
	path := paymentPath(f.sale) + "/refund"
	for _, tc := range []struct {
		name   string
		csrf   string
		header map[string]string
	}{
		{"ErrNoToken", "", nil},
		{"ErrOtherToken", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil},
		{"ErrCrossSite", form.Get("csrf"), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := url.Values{"key": {form.Get("key")}, "amount": {"100"}, "csrf": {tc.csrf}}
			code, _, _ := e.do("POST", path, v, tc.header)
			if code != http.StatusForbidden {
				t.Fatalf("POST = %d, want 403", code)
			}
		})
	}
	if p := e.payment(f.sale.ID); p.AmountRefunded != 0 {
		t.Fatalf("refunded %d by refused forms", p.AmountRefunded)
	}
	v := url.Values{"csrf": {form.Get("csrf")}, "amount": {"100"}, "key": {"mine"}}
	if code, _, _ := e.do("POST", path, v, nil); code != http.StatusBadRequest {
		t.Fatalf("POST with a key the console did not make = %d, want 400", code)
	}
}

func TestResendWebhookDelivery(t *testing.T) {
	e := newEnv(t)
	if _, _, err := e.eng.CreateWebhookEndpoint(context.Background(), e.call,
		&engine.WebhookEndpointInput{URL: "http://127.0.0.1:9/hooks"}); err != nil {
		t.Fatal(err)
	}
	c := e.customer("Pat", "pat@example.com")
	p := e.pay(c, e.card(c.ID, "4242424242424242", "123"), 500, false, "")
	body := e.get(paymentPath(p), http.StatusOK)
	i := strings.Index(body, `class="resend"`)
	if i < 0 {
		t.Fatalf("the payment's page lists no delivery to resend:\n%s", body)
	}
	href := body[strings.LastIndex(body[:i], `href="`)+len(`href="`):]
	href = href[:strings.IndexByte(href, '"')]
	if loc, _ := e.act(href); !strings.HasSuffix(loc, "?done=resent") {
		t.Fatalf("resend sent to %q", loc)
	}
	audit, _, err := e.eng.ListAuditEvents(context.Background(), surgepay.AuditFilter{ObjectID: p.ID, Page: surgepay.Page{Limit: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Action != surgepay.AuditWebhookResent || audit[0].Actor != "console:token" {
		t.Fatalf("audit rows of the payment = %+v, want one webhook_delivery.resent by console:token", audit)
	}
	if body := e.get(paymentPath(p), http.StatusOK); !strings.Contains(body, "<td>1</td>") {
		t.Errorf("the delivery's resends are not shown as 1")
	}
	// A delivery of another payment is not resent under this one.
	other := e.pay(c, e.card(c.ID, "4242424242424242", "123"), 600, false, "")
	e.get(paymentPath(other)+href[strings.Index(href, "/webhooks/"):], http.StatusNotFound)
}
