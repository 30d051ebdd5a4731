package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/telemetry"
)

// shopOrigin is the merchant's page in the checkout tests.
const shopOrigin = "https://shop.example"

// checkoutEnv is an env whose merchant A takes browser payments from
// shopOrigin, with its publishable key.
type checkoutEnv struct {
	*env
	pk string // merchant A's publishable key
}

func newCheckoutEnv(t *testing.T, e *env) *checkoutEnv {
	t.Helper()
	e.setSetting(e.merchants[0], func(s *surgepay.MerchantSettings) { s.CheckoutOrigins = []string{shopOrigin} })
	pk, k, err := e.eng.CreateAPIKeyWith(context.Background(), e.merchants[0], engine.KeyOptions{Publishable: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pk, surgepay.PublishableKeyPrefixTest) || !k.Publishable() {
		t.Fatalf("publishable key %q (prefix %q): want a pk_test_ key", pk[:8], k.Prefix)
	}
	return &checkoutEnv{env: e, pk: pk}
}

// awaiting makes a payment for the browser with merchant A's secret key
// and returns its ID and client secret.
func (c *checkoutEnv) awaiting(t *testing.T, body string) (id, secret string) {
	t.Helper()
	r := c.must(200, c.keyA, "POST", "/v1/payments", body)
	if r.str("status") != string(surgepay.StatusRequiresPaymentMethod) || !strings.HasPrefix(r.str("client_secret"), r.str("id")+"_secret_") {
		t.Fatalf("payment for the browser: %s", r.Raw)
	}
	return r.str("id"), r.str("client_secret")
}

// card saves a card as the frame does, with the publishable key.
func (c *checkoutEnv) card(t *testing.T, number string) string {
	t.Helper()
	r := c.do(c.pk, "POST", "/v1/checkout/payment_methods",
		`{"card":{"number":"`+number+`","exp_month":12,"exp_year":2030,"cvc":"123"}}`, "")
	if r.Status != 200 || r.str("customer") != "" {
		t.Fatalf("checkout payment method: %d %s", r.Status, r.Raw)
	}
	return r.str("id")
}

func (c *checkoutEnv) confirm(id, secret, pm string) *response {
	c.t.Helper()
	return c.do(c.pk, "POST", "/v1/checkout/payments/"+id+"/confirm",
		`{"client_secret":"`+secret+`","payment_method":"`+pm+`","cvc":"123"}`, "")
}

func TestCheckoutConfirmSale(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := newCheckoutEnv(t, e)
		id, secret := c.awaiting(t, `{"amount":2000,"currency":"usd","description":"two tickets","metadata":{"order":"o-1"}}`)
		// The merchant's server reads it again: a fresh secret, the payment unchanged.
		if r := c.must(200, c.keyA, "GET", "/v1/payments/"+id, ""); r.str("client_secret") == "" || r.str("status") != "requires_payment_method" {
			t.Fatalf("read while awaiting: %s", r.Raw)
		}
		pm := c.card(t, "4242424242424242")
		r := c.confirm(id, secret, pm)
		if r.Status != 200 || r.str("status") != "succeeded" || r.num("amount") != 2000 || r.str("payment_method") != pm {
			t.Fatalf("confirm: %d %s", r.Status, r.Raw)
		}
		for _, private := range []string{"description", "metadata", "customer", "transactions", "client_secret"} {
			if _, ok := r.JSON[private]; ok {
				t.Errorf("the browser's view shows %s: %s", private, r.Raw)
			}
		}
		p := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
		if p.str("status") != "succeeded" || p.num("amount_captured") != 2000 || p.str("client_secret") != "" || p.str("payment_method") != pm {
			t.Fatalf("payment after confirm: %s", p.Raw)
		}
		// A confirm sent again charges nothing more.
		if r := c.confirm(id, secret, pm); r.Status != 409 || r.errField("code") != "payment_unexpected_state" {
			t.Fatalf("second confirm: %d %s", r.Status, r.Raw)
		}
		if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.AmountCaptured != 2000 {
			t.Fatalf("the network's record: %+v", fx)
		}
		if got := c.must(200, c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, ""); got.str("status") != "succeeded" {
			t.Fatalf("browser's read: %s", got.Raw)
		}
		if strings.Contains(e.logs.String(), "4242424242424242") {
			t.Fatal("a card number reached the log")
		}
	})
}

func TestCheckoutDeclineThenAnotherCard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := newCheckoutEnv(t, e)
		id, secret := c.awaiting(t, `{"amount":1500,"currency":"eur","capture_method":"manual"}`)
		r := c.confirm(id, secret, c.card(t, "4000000000000127"))
		if r.Status != 402 || r.errField("decline_code") != surgepay.DeclineIncorrectCVC || r.errField("payment") != id {
			t.Fatalf("declined confirm: %d %s", r.Status, r.Raw)
		}
		v := c.must(200, c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, "")
		lpe, _ := v.JSON["last_payment_error"].(map[string]any)
		if v.str("status") != "requires_payment_method" || lpe["decline_code"] != surgepay.DeclineIncorrectCVC {
			t.Fatalf("after a decline: %s", v.Raw)
		}
		r = c.confirm(id, secret, c.card(t, "4242424242424242"))
		if r.Status != 200 || r.str("status") != "requires_capture" || r.JSON["last_payment_error"] != nil {
			t.Fatalf("second card: %d %s", r.Status, r.Raw)
		}
		p := c.must(200, c.keyA, "POST", "/v1/payments/"+id+"/capture", `{}`)
		if p.str("status") != "succeeded" || p.num("amount_captured") != 1500 {
			t.Fatalf("capture: %s", p.Raw)
		}
		if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.AuthorizationsDeclined != 1 || fx.AmountCaptured != 1500 {
			t.Fatalf("the network's record: %+v", fx)
		}
	})
}

func TestCheckoutPublishableKeyOnlyCheckout(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	c := newCheckoutEnv(t, e)
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/v1/payments", `{"amount":100,"currency":"usd"}`},
		{"GET", "/v1/payments", ""},
		{"POST", "/v1/customers", `{"name":"x"}`},
		{"POST", "/v1/payment_methods", `{"customer":"cus_x","card":{"number":"4242424242424242","exp_month":1,"exp_year":2031}}`},
		{"GET", "/v1/webhook_endpoints", ""},
	} {
		if r := c.do(c.pk, rt.method, rt.path, rt.body, ""); r.Status != 403 || r.errField("code") != "insufficient_scope" {
			t.Errorf("%s %s with a publishable key: %d %s", rt.method, rt.path, r.Status, r.Raw)
		}
	}
	// A secret key made with the checkout scope is refused: it is no scope of AllScopes.
	if _, _, err := e.eng.CreateAPIKeyWith(context.Background(), e.merchants[0], engine.KeyOptions{Scopes: []string{surgepay.ScopeCheckout}}); err == nil {
		t.Fatal("a secret key with the checkout scope was made")
	}
}

func TestCheckoutClientSecretChecked(t *testing.T) {
	now := time.Now().UTC()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnvWith(t, openSQLite(t), func(c *engine.Config) { c.Now = clock })
	c := newCheckoutEnv(t, e)
	id, secret := c.awaiting(t, `{"amount":500,"currency":"usd"}`)
	other, otherSecret := c.awaiting(t, `{"amount":600,"currency":"usd"}`)
	pm := c.card(t, "4242424242424242")
	tampered := []byte(secret)
	tampered[len(tampered)-3] ^= 1
	for name, s := range map[string]string{
		"another payment's": otherSecret,
		"tampered":          string(tampered),
		"the ID alone":      id + "_secret_",
		"not base64":        id + "_secret_k.zz.!!",
		"too long":          secret + strings.Repeat("a", surgepay.ClientSecretBytesMax),
	} {
		if r := c.confirm(id, s, pm); r.Status != 401 || r.errField("code") != "client_secret_invalid" || r.errField("param") != "client_secret" {
			t.Errorf("%s secret: %d %s", name, r.Status, r.Raw)
		}
	}
	// Merchant B's publishable key with A's secret: B has no such payment, and the secret names A.
	pkB, _, err := e.eng.CreateAPIKeyWith(context.Background(), e.merchants[1], engine.KeyOptions{Publishable: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.do(pkB, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, "", ""); r.Status != 401 {
		t.Errorf("another merchant's key: %d %s", r.Status, r.Raw)
	}
	if r := c.do(c.pk, "GET", "/v1/checkout/payments/"+id, "", ""); r.Status != 400 || r.errField("param") != "client_secret" {
		t.Errorf("no secret: %d %s", r.Status, r.Raw)
	}
	mu.Lock()
	now = now.Add(surgepay.ClientSecretTTL + time.Second)
	mu.Unlock()
	if r := c.confirm(id, secret, pm); r.Status != 401 || r.errField("code") != "client_secret_expired" {
		t.Fatalf("expired secret: %d %s", r.Status, r.Raw)
	}
	// The merchant's server reads the payment for a fresh one.
	fresh := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "").str("client_secret")
	if r := c.confirm(id, fresh, pm); r.Status != 200 || r.str("status") != "succeeded" {
		t.Fatalf("fresh secret: %d %s", r.Status, r.Raw)
	}
	if fx := e.sim.Effects(other); fx.Authorizations+fx.AuthorizationsDeclined != 0 {
		t.Fatalf("the other payment reached the network: %+v", fx)
	}
}

func TestCheckoutSigningKeyRotation(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	c := newCheckoutEnv(t, e)
	id, before := c.awaiting(t, `{"amount":700,"currency":"usd"}`)
	old := e.keys.SigningPrimaryID()
	if _, err := e.keys.RotateSigning(); err != nil {
		t.Fatal(err)
	}
	// A secret signed before the rotation still confirms...
	if r := c.do(c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+before, "", ""); r.Status != 200 {
		t.Fatalf("secret signed by the previous key: %d %s", r.Status, r.Raw)
	}
	// ...until its key is retired, which ends it at once.
	if err := e.keys.RetireSigning(old); err != nil {
		t.Fatal(err)
	}
	if r := c.confirm(id, before, c.card(t, "4242424242424242")); r.Status != 401 || r.errField("code") != "client_secret_invalid" {
		t.Fatalf("secret of a retired key: %d %s", r.Status, r.Raw)
	}
	after := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "").str("client_secret")
	if r := c.confirm(id, after, c.card(t, "4242424242424242")); r.Status != 200 {
		t.Fatalf("secret of the new key: %d %s", r.Status, r.Raw)
	}
}

func TestCheckoutOrigins(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	c := newCheckoutEnv(t, e)
	id, secret := c.awaiting(t, `{"amount":800,"currency":"usd"}`)
	path := "/v1/checkout/payments/" + id + "?client_secret=" + secret
	get := func(origin string) *response {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return c.doHeader(t, c.pk, "GET", path, "", h)
	}
	if r := get(shopOrigin); r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != shopOrigin {
		t.Fatalf("the merchant's page: %d %v %s", r.Status, r.Header, r.Raw)
	}
	for _, o := range []string{"https://evil.example", "https://shop.example.evil.example", "http://shop.example", "null"} {
		r := get(o)
		if r.Status != 403 || r.errField("code") != "origin_not_allowed" || r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("origin %s: %d %v %s", o, r.Status, r.Header, r.Raw)
		}
	}
	// The frame is the API's own origin.
	if r := get(e.url); r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("same origin: %d %s", r.Status, r.Raw)
	}
	// No Origin: not a browser.
	if r := get(""); r.Status != 200 {
		t.Errorf("no origin: %d %s", r.Status, r.Raw)
	}
	req, _ := http.NewRequest("OPTIONS", e.url+"/v1/checkout/payments/"+id+"/confirm", nil)
	req.Header.Set("Origin", shopOrigin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	res, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != shopOrigin ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
	// Settings: an origin with a path is refused.
	bad := surgepay.DefaultMerchantSettings()
	bad.CheckoutOrigins = []string{"https://shop.example/"}
	var se *surgepay.Error
	if err := bad.Validate("merchants.m"); !errors.As(err, &se) || se.Param != "merchants.m.checkout_origins" {
		t.Fatalf("origin with a path: %v", err)
	}
}

func TestCheckoutClientRateLimit(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	c := newCheckoutEnv(t, e)
	id, secret := c.awaiting(t, `{"amount":900,"currency":"usd"}`)
	var refused *response
	_, burst := e.eng.SettingsFor(e.merchants[0]).CheckoutClientLimit()
	for i := 0; i < burst+surgepay.CheckoutClientRateDefault*2 && refused == nil; i++ {
		if r := c.do(c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, "", ""); r.Status == 429 {
			refused = r
		}
	}
	if refused == nil || refused.Header.Get("Retry-After") == "" {
		t.Fatal("a client address was never limited")
	}
	// The merchant's own server is not limited by it.
	c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
	// A merchant behind a proxy raises it.
	e.setSetting(e.merchants[0], func(s *surgepay.MerchantSettings) { s.CheckoutClientRate = 1000 })
	// The change reaches the emptied bucket with the next request; it
	// refills at the new rate from then on.
	c.do(c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, "", "")
	time.Sleep(20 * time.Millisecond)
	if r := c.do(c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, "", ""); r.Status != 200 {
		t.Fatalf("with checkout_client_rate raised: %d %s", r.Status, r.Raw)
	}
}

// Behind a trusted proxy (trusted_proxies), each shopper has a bucket of
// its own, by the address the proxy appends to X-Forwarded-For; what a
// shopper writes there itself picks no other bucket. Without the setting
// the header is ignored: every request from the proxy shares one bucket.
func TestCheckoutClientRateBehindProxy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		trusted []netip.Prefix
	}{
		{"trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}},
		{"no trusted proxies", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newServeLikeEnv(t, api.Config{TrustedProxies: tt.trusted}, 64)
			c := newCheckoutEnv(t, e)
			id, secret := c.awaiting(t, `{"amount":900,"currency":"usd"}`)
			get := func(xff string) int {
				return e.doHeader(t, c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, "",
					http.Header{"X-Forwarded-For": {xff}}).Status
			}
			_, burst := e.eng.SettingsFor(e.merchants[0]).CheckoutClientLimit()
			refused := false
			for i := 0; i < burst+surgepay.CheckoutClientRateDefault*2 && !refused; i++ {
				refused = get("198.51.100.1") == 429
			}
			if !refused {
				t.Fatal("shopper 198.51.100.1 was never limited")
			}
			// The same shopper, writing another address left of the one
			// the proxy appends.
			if got := get("203.0.113.50, 198.51.100.1"); got != 429 {
				t.Errorf("shopper 198.51.100.1 with a forged entry: %d, want 429", got)
			}
			other := get("198.51.100.2")
			if tt.trusted != nil && other != 200 {
				t.Errorf("behind a trusted proxy another shopper got %d, want 200: a bucket of its own", other)
			}
			if tt.trusted == nil && other != 429 {
				t.Errorf("without trusted_proxies another X-Forwarded-For got %d, want 429: the header ignored", other)
			}
		})
	}
}

func TestCheckoutCancelAwaiting(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := newCheckoutEnv(t, e)
		id, secret := c.awaiting(t, `{"amount":1000,"currency":"usd"}`)
		p := c.must(200, c.keyA, "POST", "/v1/payments/"+id+"/void", `{}`)
		if p.str("status") != "canceled" || p.str("client_secret") != "" {
			t.Fatalf("void while awaiting: %s", p.Raw)
		}
		if r := c.confirm(id, secret, c.card(t, "4242424242424242")); r.Status != 409 {
			t.Fatalf("confirm after cancel: %d %s", r.Status, r.Raw)
		}
		if fx := e.sim.Effects(id); fx.Authorizations+fx.AuthorizationsDeclined != 0 {
			t.Fatalf("a cancel reached the network: %+v", fx)
		}
	})
}

func TestCheckoutBadInput(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	c := newCheckoutEnv(t, e)
	id, secret := c.awaiting(t, `{"amount":1100,"currency":"usd"}`)
	pm := c.card(t, "4242424242424242")
	for _, tc := range []struct{ body, param string }{
		{`{"client_secret":"` + secret + `"}`, "payment_method"},
		{`{"client_secret":"` + secret + `","payment_method":"` + pm + `","cvc":"12"}`, "cvc"},
		{`{"client_secret":"` + secret + `","payment_method":"` + pm + `","return_url":"javascript:alert(1)"}`, "return_url"},
		{`{"client_secret":"` + secret + `","payment_method":"pm_nope"}`, "payment_method"},
		{`{"client_secret":"` + secret + `","payment_method":"` + pm + `","extra":1}`, "extra"},
		{`{"payment_method":"` + pm + `"}`, "client_secret"},
	} {
		r := c.do(c.pk, "POST", "/v1/checkout/payments/"+id+"/confirm", tc.body, "")
		if r.Status < 400 || r.Status >= 500 || r.errField("param") != tc.param {
			t.Errorf("%s: %d %s, want a 4xx naming %s", tc.body, r.Status, r.Raw, tc.param)
		}
	}
	for _, tc := range []struct{ body, param string }{
		{`{"card":{"number":"4242424242424241","exp_month":12,"exp_year":2030}}`, "card.number"},
		{`{"card":{"number":"4242424242424242","exp_month":13,"exp_year":2030}}`, "card.exp_month"},
		{`{}`, "card"},
	} {
		r := c.do(c.pk, "POST", "/v1/checkout/payment_methods", tc.body, "")
		if r.Status != 400 || r.errField("param") != tc.param {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, r.Status, r.Raw, tc.param)
		}
	}
	// A cvc without a card is refused where the payment is made.
	if r := c.do(c.keyA, "POST", "/v1/payments", `{"amount":100,"currency":"usd","cvc":"123"}`, ""); r.Status != 400 || r.errField("param") != "cvc" {
		t.Errorf("cvc without a card: %d %s", r.Status, r.Raw)
	}
	if v := c.must(200, c.keyA, "GET", "/v1/payments/"+id, ""); v.str("status") != "requires_payment_method" || len(v.JSON["transactions"].([]any)) != 0 {
		t.Fatalf("bad input changed the payment: %s", v.Raw)
	}
	if strings.Contains(e.logs.String(), "4242424242424241") || strings.Contains(e.logs.String(), "4242424242424242") {
		t.Fatal("a card number reached the log")
	}
}

// lostAnswers is the simulator with its authorizations' answers lost and
// its lookups failing while down is set: the processor charged, surgepay
// cannot tell yet.
type lostAnswers struct {
	*sim.Provider
	down atomic.Bool
}

var errDown = errors.New("processor unreachable")

func (l *lostAnswers) Authorize(ctx context.Context, req *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	res, err := l.Provider.Authorize(ctx, req)
	if err == nil && l.down.Load() {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: surgepay.TxAuthorization, Err: errDown}
	}
	return res, err
}

func (l *lostAnswers) Lookup(ctx context.Context, key string) (*surgepay.ProviderResult, error) {
	if l.down.Load() {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Err: errDown}
	}
	return l.Provider.Lookup(ctx, key)
}

// TestCheckoutConfirmUnknownOutcome: a confirm whose processor charged
// but whose answer was lost stays processing (never "not processed",
// never a second charge), and the reconciler records the charge once the
// confirm's grace has passed.
func TestCheckoutConfirmUnknownOutcome(t *testing.T) {
	forEachBackend(t, func(t *testing.T, base *env) {
		now := time.Now().UTC()
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		p := &lostAnswers{Provider: sim.New(sim.DefaultConfig())}
		e := newEnvWith(t, base.store, func(c *engine.Config) { c.Provider, c.Now = p, clock })
		c := newCheckoutEnv(t, e)
		id, secret := c.awaiting(t, `{"amount":1200,"currency":"usd"}`)
		pm := c.card(t, "4242424242424242")
		p.down.Store(true)
		r := c.confirm(id, secret, pm)
		if r.Status != 200 || r.str("status") != "processing" {
			t.Fatalf("confirm with its answer lost: %d %s", r.Status, r.Raw)
		}
		if r := c.confirm(id, secret, pm); r.Status != 409 {
			t.Fatalf("confirm again while processing: %d %s", r.Status, r.Raw)
		}
		p.down.Store(false)
		if n, err := e.eng.ReconcileOnce(context.Background()); err != nil || n != 0 {
			t.Fatalf("reconciled during the confirm's grace: %d %v", n, err)
		}
		mu.Lock()
		now = now.Add(engine.ConfirmReconcileGrace + time.Second)
		mu.Unlock()
		if n, err := e.eng.ReconcileOnce(context.Background()); err != nil || n != 1 {
			t.Fatalf("reconcile after the grace: %d %v", n, err)
		}
		got := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
		if got.str("status") != "succeeded" || got.num("amount_captured") != 1200 {
			t.Fatalf("after reconciliation: %s", got.Raw)
		}
		if fx := p.Effects(id); fx.Authorizations != 1 || fx.AmountCaptured != 1200 {
			t.Fatalf("the network's record: %+v", fx)
		}
	})
}

// noRedirects is an HTTP client that hands back redirects, as a test of
// where the browser is sent must see them.
func noRedirects(e *env) *http.Client {
	c := *e.http
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// confirm3DS confirms payment id with card number from the frame (its
// Origin is the API's own) and a return_url on the shop.
func (c *checkoutEnv) confirm3DS(t *testing.T, id, secret, number string) *response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}, "Origin": {c.url}}
	return c.doHeader(t, c.pk, "POST", "/v1/checkout/payments/"+id+"/confirm",
		`{"client_secret":"`+secret+`","payment_method":"`+c.card(t, number)+`","cvc":"123","return_url":"`+shopOrigin+`/done?order=7"}`, h)
}

// challenge passes (or fails) the simulator's challenge at the
// payment's next action as a shopper would, and follows the return to
// the shop's page: it returns where the shopper lands.
func (c *checkoutEnv) challenge(t *testing.T, r *response, outcome string) *url.URL {
	t.Helper()
	na, _ := r.JSON["next_action"].(map[string]any)
	rt, _ := na["redirect_to_url"].(map[string]any)
	action, _ := rt["url"].(string)
	if r.str("status") != "requires_action" || !strings.HasPrefix(action, c.url+surgepay.PagesPrefix+"3ds/") ||
		rt["return_url"] != shopOrigin+"/done?order=7" {
		t.Fatalf("confirm of a challenge card: %d %s", r.Status, r.Raw)
	}
	hc := noRedirects(c.env)
	page, err := hc.Get(action)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(page.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("challenge page: %d %v", page.StatusCode, page.Header)
	}
	done, err := hc.PostForm(action, url.Values{"outcome": {outcome}})
	if err != nil {
		t.Fatal(err)
	}
	done.Body.Close()
	back := done.Header.Get("Location")
	if done.StatusCode != http.StatusSeeOther || !strings.HasPrefix(back, c.url+surgepay.CheckoutReturnPath) {
		t.Fatalf("challenge answered: %d, to %q", done.StatusCode, back)
	}
	var land *url.URL
	for range 2 { // a second return (a reload) finds the outcome recorded
		ret, err := hc.Get(back)
		if err != nil {
			t.Fatal(err)
		}
		ret.Body.Close()
		if land, err = url.Parse(ret.Header.Get("Location")); ret.StatusCode != http.StatusSeeOther || err != nil ||
			land.Host != "shop.example" || land.Path != "/done" || land.Query().Get("order") != "7" {
			t.Fatalf("return from the challenge: %d, to %q", ret.StatusCode, ret.Header.Get("Location"))
		}
	}
	return land
}

func TestCheckoutThreeDSecure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := newCheckoutEnv(t, e)
		// Passed: authorized and captured once the shopper comes back.
		id, secret := c.awaiting(t, `{"amount":3000,"currency":"eur"}`)
		r := c.confirm3DS(t, id, secret, sim.Card3DSChallenge)
		if c.must(200, c.keyA, "GET", "/v1/payments/"+id, "").str("client_secret") == "" {
			t.Fatal("a payment awaiting authentication has no client secret for the page")
		}
		land := c.challenge(t, r, sim.OutcomeAuthenticate)
		if land.Query().Get("redirect_status") != "succeeded" || land.Query().Get("surgepay_payment") != id {
			t.Fatalf("landed on %s", land)
		}
		p := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
		if p.str("status") != "succeeded" || p.num("amount_captured") != 3000 {
			t.Fatalf("after authentication: %s", p.Raw)
		}
		if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.AmountCaptured != 3000 {
			t.Fatalf("the network's record: %+v", fx)
		}

		// Failed: the payment awaits another card, which pays.
		id, secret = c.awaiting(t, `{"amount":3100,"currency":"eur"}`)
		land = c.challenge(t, c.confirm3DS(t, id, secret, sim.Card3DSChallenge), sim.OutcomeFail)
		v := c.must(200, c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, "")
		lpe, _ := v.JSON["last_payment_error"].(map[string]any)
		if land.Query().Get("redirect_status") != "failed" || v.str("status") != "requires_payment_method" ||
			lpe["decline_code"] != surgepay.DeclineAuthenticationFailed {
			t.Fatalf("failed authentication: landed on %s, payment %s", land, v.Raw)
		}
		if r := c.confirm(id, secret, c.card(t, "4242424242424242")); r.Status != 200 || r.str("status") != "succeeded" {
			t.Fatalf("another card after a failed authentication: %d %s", r.Status, r.Raw)
		}
		if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.AmountCaptured != 3100 {
			t.Fatalf("the network's record: %+v", fx)
		}

		// Frictionless: no challenge.
		id, secret = c.awaiting(t, `{"amount":3200,"currency":"eur"}`)
		if r := c.confirm3DS(t, id, secret, sim.Card3DSFrictionless); r.Status != 200 || r.str("status") != "succeeded" {
			t.Fatalf("frictionless: %d %s", r.Status, r.Raw)
		}
		// Unavailable: declined, nothing charged.
		id, secret = c.awaiting(t, `{"amount":3300,"currency":"eur"}`)
		if r := c.confirm3DS(t, id, secret, sim.Card3DSUnavailable); r.Status != 402 ||
			r.errField("decline_code") != surgepay.DeclineAuthenticationUnavailable {
			t.Fatalf("authentication unavailable: %d %s", r.Status, r.Raw)
		}
		// A server's payment cannot authenticate: declined as before.
		cus, pm := c.customerWithCard(c.keyA, sim.Card3DSChallenge)
		if r := c.do(c.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 3400, "automatic"), ""); r.Status != 402 ||
			r.errField("decline_code") != surgepay.DeclineAuthenticationRequired {
			t.Fatalf("a server's payment with a challenge card: %d %s", r.Status, r.Raw)
		}
	})
}

func TestCheckoutReturnTokenChecked(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	c := newCheckoutEnv(t, e)
	id, secret := c.awaiting(t, `{"amount":3500,"currency":"usd"}`)
	r := c.confirm3DS(t, id, secret, sim.Card3DSChallenge)
	hc := noRedirects(e)
	na := r.JSON["next_action"].(map[string]any)["redirect_to_url"].(map[string]any)
	done, err := hc.PostForm(na["url"].(string), url.Values{"outcome": {sim.OutcomeAuthenticate}})
	if err != nil {
		t.Fatal(err)
	}
	done.Body.Close()
	back := done.Header.Get("Location")
	i := strings.LastIndexByte(back, '.') + 2
	for _, bad := range []string{back[:i] + string(back[i]^1) + back[i+1:], c.url + surgepay.CheckoutReturnPath + "x.y.z"} {
		res, err := hc.Get(bad)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
			t.Errorf("altered return %q: %d to %q", bad, res.StatusCode, res.Header.Get("Location"))
		}
	}
	if p := c.must(200, c.keyA, "GET", "/v1/payments/"+id, ""); p.str("status") != "requires_action" {
		t.Fatalf("an altered return changed the payment: %s", p.Raw)
	}
	// The browser's read finds the outcome the shopper did not come back with.
	if v := c.must(200, c.pk, "GET", "/v1/checkout/payments/"+id+"?client_secret="+secret, ""); v.str("status") != "succeeded" {
		t.Fatalf("browser's read after the challenge: %s", v.Raw)
	}
}

// TestCheckoutThreeDSecureAbandoned: a challenge nobody finishes ends,
// at the reconciler, with the payment awaiting a card again.
func TestCheckoutThreeDSecureAbandoned(t *testing.T) {
	now := time.Now().UTC()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg := sim.DefaultConfig()
	cfg.ChallengeTTL = sim.Duration(sim.ChallengeTTLMin)
	p := sim.New(cfg)
	e := newEnvWith(t, openSQLite(t), func(c *engine.Config) { c.Provider, c.Now = p, clock })
	e.sim = p
	c := newCheckoutEnv(t, e)
	id, secret := c.awaiting(t, `{"amount":3600,"currency":"usd"}`)
	if r := c.confirm3DS(t, id, secret, sim.Card3DSChallenge); r.str("status") != "requires_action" {
		t.Fatalf("confirm: %s", r.Raw)
	}
	if n, err := e.eng.ReconcileOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("reconciled a fresh challenge: %d %v", n, err)
	}
	time.Sleep(sim.ChallengeTTLMin + 500*time.Millisecond) // the simulator's own clock abandons it
	mu.Lock()
	now = now.Add(engine.ActionReconcileAfter + time.Second)
	mu.Unlock()
	if n, err := e.eng.ReconcileOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile an abandoned challenge: %d %v", n, err)
	}
	got := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
	if got.str("status") != "requires_payment_method" || got.str("decline_code") != surgepay.DeclineAuthenticationFailed {
		t.Fatalf("after abandon: %s", got.Raw)
	}
	if fx := p.Effects(id); fx.Authorizations != 0 {
		t.Fatalf("an abandoned challenge charged: %+v", fx)
	}
}

// TestCheckoutThreeDSecurePayAgainSimulator: paying again, with another
// card, while the simulator's challenge is pending cancels the challenge
// first (a Void of its reference), so that its page can no longer
// authorize it, and the new card pays: the network has one sale and the
// cancelled challenge's authorization declined.
func TestCheckoutThreeDSecurePayAgainSimulator(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := newCheckoutEnv(t, e)
		id, secret := c.awaiting(t, `{"amount":3700,"currency":"eur"}`)
		r := c.confirm3DS(t, id, secret, sim.Card3DSChallenge)
		na, _ := r.JSON["next_action"].(map[string]any)
		rt, _ := na["redirect_to_url"].(map[string]any)
		action, _ := rt["url"].(string)
		if r.str("status") != "requires_action" || action == "" {
			t.Fatalf("confirm of a challenge card: %d %s", r.Status, r.Raw)
		}
		if again := c.confirm(id, secret, c.card(t, "4242424242424242")); again.Status != 200 || again.str("status") != "succeeded" {
			t.Fatalf("paying again while the challenge is pending: %d %s; want succeeded", again.Status, again.Raw)
		}
		if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.AuthorizationsDeclined != 1 || fx.AmountCaptured != 3700 {
			t.Fatalf("the network's record: %+v; want one sale of 3700 and the cancelled challenge declined", fx)
		}
		// The first challenge's page, answered late, authorizes nothing.
		done, err := noRedirects(e).PostForm(action, url.Values{"outcome": {sim.OutcomeAuthenticate}})
		if err != nil {
			t.Fatal(err)
		}
		done.Body.Close()
		if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.AmountCaptured != 3700 {
			t.Fatalf("after the cancelled challenge was answered: %+v; want the one sale", fx)
		}
		p := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
		if p.str("status") != "succeeded" || p.num("amount_captured") != 3700 {
			t.Fatalf("paid again: %s", p.Raw)
		}
	})
}

// TestCheckoutThreeDSecureManyPending: more authentications pending than
// a reconcile pass looks at (a quarter of ReconcileBatchMax) are all
// looked up in turn, a page a pass: the newest one, authenticated by a
// shopper who never came back, is recorded by the second pass, though
// the older ones stay pending at the processor.
func TestCheckoutThreeDSecureManyPending(t *testing.T) {
	now := time.Now().UTC()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg := sim.DefaultConfig()
	cfg.ChallengeTTL = sim.Duration(sim.ChallengeTTLMax) // the processor keeps them pending
	p := sim.New(cfg)
	e := newEnvWith(t, openSQLite(t), func(c *engine.Config) { c.Provider, c.Now = p, clock })
	e.sim = p
	c := newCheckoutEnv(t, e)
	e.setSetting(e.merchants[0], func(s *surgepay.MerchantSettings) { s.CheckoutClientRate = 1000 }) // one test client, many shoppers
	page := surgepay.RequiresActionListed(engine.ReconcileBatchMax)
	var last string
	var action string
	for range page + 5 {
		id, secret := c.awaiting(t, `{"amount":1200,"currency":"usd"}`)
		r := c.confirm3DS(t, id, secret, sim.Card3DSChallenge)
		if r.str("status") != "requires_action" {
			t.Fatalf("confirm: %s", r.Raw)
		}
		last = id
		action = r.JSON["next_action"].(map[string]any)["redirect_to_url"].(map[string]any)["url"].(string)
	}
	done, err := noRedirects(e).PostForm(action, url.Values{"outcome": {sim.OutcomeAuthenticate}})
	if err != nil {
		t.Fatal(err)
	}
	done.Body.Close()
	mu.Lock()
	now = now.Add(engine.ActionReconcileAfter + time.Second)
	mu.Unlock()
	for pass, want := range []int{0, 1, 0} { // the oldest page, the rest, the oldest again
		if n, err := e.eng.ReconcileOnce(context.Background()); err != nil || n != want {
			t.Fatalf("pass %d: reconciled %d, %v; want %d", pass+1, n, err, want)
		}
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+last, ""); got.str("status") != "succeeded" {
		t.Fatalf("the newest, authenticated without a return: %s", got.Raw)
	}
}

// liveSim is the simulator saying it moves real money, as a live Stripe
// key does.
type liveSim struct{ *sim.Provider }

func (liveSim) Mode() string { return "live" }

// TestPublishableKeyLive: a merchant whose processor is live gets
// pk_live_ keys, through the telemetry decorator too.
func TestPublishableKeyLive(t *testing.T) {
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, openSQLite(t), func(c *engine.Config) { c.Provider = tel.WrapProvider(liveSim{sim.New(sim.DefaultConfig())}) })
	pk, _, err := e.eng.CreateAPIKeyWith(context.Background(), e.merchants[0], engine.KeyOptions{Publishable: true})
	if err != nil || !strings.HasPrefix(pk, surgepay.PublishableKeyPrefixLive) {
		t.Fatalf("publishable key of a live merchant: %.8s…, %v; want pk_live_", pk, err)
	}
}
