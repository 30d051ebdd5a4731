package console_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
	"github.com/surgepay/surgepay/webhook"
)

const testToken = "spadm_console-test-token-0123456789"

// testReadToken is the admin listener's read-only token in the tests.
const testReadToken = "spadmr_console-read-token-0123456789"

// env is an admin listener with the console on 127.0.0.1, over an engine
// on a fresh SQLite store with the in-process simulator and a webhook
// outbox, and a browser-like client logged in with the admin token.
type env struct {
	t        *testing.T
	eng      *engine.Engine
	base     string
	hc       *http.Client // with the session and CSRF cookies
	merchant *surgepay.Merchant
	call     *engine.Call
	store    surgepay.Store
	vault    surgepay.Vault
}

// envOption changes the engine's or the console's configuration of an
// env before they are made.
type envOption func(*engine.Config, *console.Config)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	store := testenv.OpenSQLite(t)
	ws := store.(surgepay.WebhookStore)
	outbox := webhook.NewOutbox(webhook.OutboxConfig{Store: ws, RenderPayment: api.PaymentObject})
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ecfg := engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: keys, Outbox: outbox}
	ccfg := console.Config{Actor: admin.Actor, ReadOnly: admin.ReadOnly, ReconcileInterval: time.Second}
	for _, o := range opts {
		o(&ecfg, &ccfg)
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	ccfg.Engine = eng
	h := admin.Handler(admin.Config{Auth: admin.Guard{Token: func() string { return testToken },
		ReadToken: func() string { return testReadToken }}, Console: console.New(ccfg)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	jar, _ := cookiejar.New(nil)
	e := &env{t: t, eng: eng, store: store, vault: keys, base: "http://" + ln.Addr().String(),
		hc: &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}}
	e.merchant, err = eng.CreateMerchant(context.Background(), "Shop <b>&amp;</b> \"Co\"")
	if err != nil {
		t.Fatal(err)
	}
	e.call = &engine.Call{MerchantID: e.merchant.ID, KeyID: "key_test"}
	e.login(testToken)
	return e
}

// login posts token to the login form, as a browser would.
func (e *env) login(token string) {
	e.t.Helper()
	code, _, h := e.do("POST", "/login", url.Values{"token": {token}, "next": {"/console/"}}, nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/console/" {
		e.t.Fatalf("log in: %d to %q, want 303 to /console/", code, h.Get("Location"))
	}
}

// as returns e with another browser, logged in with token.
func (e *env) as(token string) *env {
	e.t.Helper()
	o := *e
	jar, _ := cookiejar.New(nil)
	hc := *e.hc
	hc.Jar = jar
	o.hc = &hc
	o.login(token)
	return &o
}

// do sends a request with the client's cookies (a form as the body when
// form is set) and returns the status, body and headers.
func (e *env) do(method, path string, form url.Values, header map[string]string) (int, string, http.Header) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// get fetches a page and fails unless its status is want.
func (e *env) get(path string, want int) string {
	e.t.Helper()
	code, body, _ := e.do("GET", path, nil, nil)
	if code != want {
		e.t.Fatalf("GET %s = %d, want %d; body:\n%s", path, code, want, body)
	}
	return body
}

// customer makes a customer of the test merchant.
func (e *env) customer(name, email string) *surgepay.Customer {
	e.t.Helper()
	c, err := e.eng.CreateCustomer(context.Background(), e.call, &engine.CustomerInput{Name: name, Email: email,
		Metadata: map[string]string{"note": "<script>alert('meta')</script>"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// card saves a card for a customer.
func (e *env) card(customerID, number, cvc string) *surgepay.PaymentMethod {
	e.t.Helper()
	pm, err := e.eng.CreatePaymentMethod(context.Background(), e.call, &engine.CardInput{CustomerID: customerID,
		Card: surgepay.CardInput{Number: surgepay.PAN(number), ExpMonth: 12, ExpYear: time.Now().Year() + 3,
			CVC: surgepay.CVC(cvc), Name: "Zoë <i>O'Brien</i>"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return pm
}

// pay makes a payment on a saved card: a sale, or with manual an
// authorization; key, if set, is its Idempotency-Key.
func (e *env) pay(c *surgepay.Customer, pm *surgepay.PaymentMethod, amount int64, manual bool, key string) *surgepay.Payment {
	e.t.Helper()
	call := *e.call
	if key != "" {
		call.IdempotencyKey = key
		call.RequestHash = surgepay.RequestHash("POST", "/v1/payments", []byte(key))
		call.Render = func(v any, err error) (int, []byte) {
			_, body := renderPayment(v)
			return 200, body
		}
	}
	in := &engine.PaymentInput{Amount: amount, Currency: "eur", CustomerID: c.ID, PaymentMethodID: pm.ID,
		Description: "order <b>42</b>", Metadata: map[string]string{"order": "\"><img src=x onerror=alert(1)>"}}
	if manual {
		in.CaptureMethod = surgepay.CaptureManual
	}
	p, err := e.eng.CreatePayment(context.Background(), &call, in)
	if err != nil {
		e.t.Fatalf("CreatePayment: %v", err)
	}
	return p
}

// renderPayment renders a payment as the API stores it.
func renderPayment(v any) (int, []byte) {
	p, _ := v.(*surgepay.Payment)
	if p == nil {
		return 500, []byte(`{}`)
	}
	return 200, []byte(`{"id":"` + p.ID + `","object":"payment"}`)
}

// payment reads a payment from the engine.
func (e *env) payment(id string) *surgepay.Payment {
	e.t.Helper()
	p, err := e.eng.GetPayment(context.Background(), e.call, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`)

// confirmForm reads the hidden fields of a confirmation page.
func confirmForm(t *testing.T, page string) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], m[2])
	}
	if v.Get("csrf") == "" || v.Get("key") == "" {
		t.Fatalf("the confirmation page has no csrf or key field:\n%s", page)
	}
	return v
}

// paymentPath is a payment's page in the console.
func paymentPath(p *surgepay.Payment) string {
	return "/console/merchants/" + p.MerchantID + "/payments/" + p.ID
}
