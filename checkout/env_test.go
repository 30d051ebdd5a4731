package checkout_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// env is surgepay's API (with the checkout assets) on one 127.0.0.1
// listener, over an engine on a fresh SQLite store with the simulator,
// and a merchant shop on another listener, whose origin is the
// merchant's one checkout origin: a real cross-origin embedding. A third
// listener, other, serves the same shop on an origin the merchant does
// not list.
type env struct {
	t        *testing.T
	eng      *engine.Engine
	sim      *sim.Provider // the processor: its Effects are the money moved
	api      string        // surgepay's origin
	shop     string        // the merchant's shop, in checkout_origins
	other    string        // a shop on an origin not in checkout_origins
	merchant *surgepay.Merchant
	secret   string // the merchant's secret key
	pk       string // its publishable key
	hits     *hits  // the API listener's requests by path
	skew     *atomic.Int64
	// loseConfirms makes the API listener serve each confirm and then
	// close its connection without the answer: the network failed.
	loseConfirms atomic.Bool
}

// loseAnswer serves r, then closes the connection instead of answering;
// it returns the status of the answer lost.
func loseAnswer(w http.ResponseWriter, r *http.Request, h http.Handler) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err) // HTTP/1.1 over loopback: hijacking works
	}
	conn.Close()
	return rec.Code
}

// advance moves the engine's clock forward by d.
func (e *env) advance(d time.Duration) { e.skew.Add(int64(d)) }

// hits counts requests by path, and keeps the status of each answer to
// a frame request and the Idempotency-Key of each confirm. Safe for
// concurrent use.
type hits struct {
	mu       sync.Mutex
	n        map[string]int
	frames   []string // "origin=… status"
	confirms []string // Idempotency-Key headers
	losts    []int    // the statuses of the answers lost
}

func (h *hits) lost(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.losts = append(h.losts, status)
}

// lostAnswers returns the statuses of the answers lost.
func (h *hits) lostAnswers() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.losts)
}

func (h *hits) add(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.URL.Path]++
	if strings.HasSuffix(r.URL.Path, "/confirm") {
		h.confirms = append(h.confirms, r.Header.Get("Idempotency-Key"))
	}
}

func (h *hits) frame(r *http.Request, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frames = append(h.frames, "origin="+r.URL.Query().Get("origin")+" "+strconv.Itoa(status))
}

// prefix returns how many requests had a path starting with p.
func (h *hits) prefix(p string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for path, c := range h.n {
		if strings.HasPrefix(path, p) {
			n += c
		}
	}
	return n
}

// frameAnswers returns the frame requests' origins and statuses.
func (h *hits) frameAnswers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.frames)
}

// confirmKeys returns the confirms' Idempotency-Keys.
func (h *hits) confirmKeys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.confirms)
}

// statusWriter keeps the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store := testenv.OpenSQLite(t)
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	skew := &atomic.Int64{}
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	p := sim.New(sim.DefaultConfig())
	eng, err := engine.New(engine.Config{Store: store, Provider: p, Vault: keys, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e := &env{t: t, eng: eng, sim: p, hits: &hits{n: map[string]int{}}, skew: skew}
	if e.merchant, err = eng.CreateMerchant(ctx, "Test shop"); err != nil {
		t.Fatal(err)
	}
	if e.secret, _, err = eng.CreateAPIKey(ctx, e.merchant.ID); err != nil {
		t.Fatal(err)
	}
	if e.pk, _, err = eng.CreateAPIKeyWith(ctx, e.merchant.ID, engine.KeyOptions{Publishable: true}); err != nil {
		t.Fatal(err)
	}
	apiHandler := api.New(api.Config{Engine: eng})
	e.api = serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.add(r)
		if e.loseConfirms.Load() && strings.HasSuffix(r.URL.Path, "/confirm") {
			e.hits.lost(loseAnswer(w, r, apiHandler))
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		apiHandler.ServeHTTP(sw, r)
		if r.URL.Path == "/checkout/v1/frame" {
			e.hits.frame(r, sw.status)
		}
	}))
	e.shop = serve(t, shopHandler(e))
	e.other = serve(t, shopHandler(e))
	s := surgepay.DefaultMerchantSettings()
	s.CheckoutOrigins = []string{e.shop}
	eng.SetSettings(&engine.Settings{Default: surgepay.DefaultMerchantSettings(),
		Merchants: map[string]surgepay.MerchantSettings{e.merchant.ID: s}})
	return e
}

// serve serves h on 127.0.0.1 until the test ends and returns its origin.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// do calls the API with the merchant's secret key and decodes the answer
// into out (if not nil); it returns the status and the body.
func (e *env) do(method, path string, body any, out any) (int, string) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.api+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		var k [8]byte
		rand.Read(k[:])
		req.Header.Set("Idempotency-Key", "checkout-test-"+hex.EncodeToString(k[:]))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return res.StatusCode, string(b)
}

// awaiting is a payment awaiting the browser's card, as the merchant's
// server makes it.
type awaiting struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ClientSecret string `json:"client_secret"`
}

// newPayment makes a payment of 20.00 USD without a card and returns it
// with its client secret.
func (e *env) newPayment() awaiting {
	e.t.Helper()
	var p awaiting
	if code, body := e.do("POST", "/v1/payments", map[string]any{"amount": 2000, "currency": "usd"}, &p); code != http.StatusOK {
		e.t.Fatalf("POST /v1/payments = %d: %s", code, body)
	}
	if p.Status != "requires_payment_method" || !strings.HasPrefix(p.ClientSecret, p.ID+"_secret_") {
		e.t.Fatalf("the new payment is %+v, want requires_payment_method with a client secret", p)
	}
	return p
}

// paymentView is what the tests read of a payment through the API.
type paymentView struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	Amount        int64  `json:"amount"`
	PaymentMethod any    `json:"payment_method"`
}

// payment reads a payment through the API with the secret key, and the
// last4 of its card (read from its payment method).
func (e *env) payment(id string) (paymentView, string) {
	e.t.Helper()
	var p paymentView
	if code, body := e.do("GET", "/v1/payments/"+id, nil, &p); code != http.StatusOK {
		e.t.Fatalf("GET /v1/payments/%s = %d: %s", id, code, body)
	}
	pmID := ""
	switch pm := p.PaymentMethod.(type) {
	case string:
		pmID = pm
	case map[string]any:
		if c, ok := pm["card"].(map[string]any); ok {
			l4, _ := c["last4"].(string)
			return p, l4
		}
		pmID, _ = pm["id"].(string)
	}
	if pmID == "" {
		return p, ""
	}
	var pm struct {
		Card struct {
			Last4 string `json:"last4"`
		} `json:"card"`
	}
	if code, body := e.do("GET", "/v1/payment_methods/"+pmID, nil, &pm); code != http.StatusOK {
		e.t.Fatalf("GET /v1/payment_methods/%s = %d: %s", pmID, code, body)
	}
	return p, pm.Card.Last4
}

// shopURL is the shop's page that pays the payment of secret (on the
// shop's origin, or with other on the origin the merchant does not list).
func (e *env) shopURL(origin, secret string) string {
	return origin + "/?" + url.Values{"key": {e.pk}, "secret": {secret}}.Encode()
}

// shopHandler serves the test shop: a page that loads surgepay.js from
// the API's origin, mounts the card and pays on a click, under a CSP
// as strict as a careful merchant's (no inline script or style).
func shopHandler(e *env) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' "+e.api+"; frame-src "+e.api+
			"; style-src 'self'; base-uri 'none'; form-action 'self'")
		_, _ = io.WriteString(w, strings.ReplaceAll(shopPage, "API_ORIGIN", e.api))
	})
	mux.HandleFunc("GET /shop.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = io.WriteString(w, strings.ReplaceAll(shopJS, "API_ORIGIN", e.api))
	})
	mux.HandleFunc("GET /shop.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = io.WriteString(w, shopCSS)
	})
	return mux
}

const shopPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Test shop: checkout</title>
<link rel="stylesheet" href="/shop.css">
<script src="API_ORIGIN/checkout/v1/surgepay.js"></script>
<script src="/shop.js" defer></script>
</head>
<body>
<main>
<h1>Test shop</h1>
<p>Order 42: one blue mug, <strong>20.00 USD</strong>.</p>
<div id="card"></div>
<button id="pay" type="button">Pay 20.00 USD</button>
<button id="check" type="button">Check the payment</button>
<p id="status" aria-live="polite"></p>
<p id="result" data-n="0"></p>
<p id="checked" data-n="0"></p>
<p id="returned" data-n="0"></p>
<p><a id="resume" hidden>Continue to your bank's authentication</a></p>
</main>
</body>
</html>
`

// shopJS pays on a click and writes the outcome in #result (data-n
// counts the outcomes). A confirm may leave the page for 3-D Secure: the
// page notes its client secret in sessionStorage first, and when the
// shopper comes back (redirect_status in the address, or the back button
// to a page with a confirm noted) it reads the payment through a freshly
// mounted frame and writes what it found in #returned: the status and
// any decline code, or "authentication pending" (data-via says how the
// shopper came back: return; load, by the back button or a reload; or
// restored from the back-forward cache). A payment still awaiting
// authentication offers its challenge again (#resume). It keeps every
// message the page received from anywhere in window.seen, as JSON, so the tests can check that no card
// data reached the page. With ?lie=ORIGIN it does not use surgepay.js
// but embeds the frame itself, claiming to be ORIGIN.
const shopJS = `'use strict';
const q = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
window.seen = [];
window.addEventListener('message', (ev) => { window.seen.push(JSON.stringify(ev.data)); });
if (q.get('lie')) {
  const f = document.createElement('iframe');
  f.src = 'API_ORIGIN/checkout/v1/frame?key=' + encodeURIComponent(q.get('key')) + '&origin=' + encodeURIComponent(q.get('lie'));
  f.title = 'lie';
  f.addEventListener('load', () => { document.body.dataset.lie = 'loaded'; });
  $('card').appendChild(f);
} else {
  const sp = Surgepay(q.get('key'));
  const card = sp.card();
  const secret = q.get('secret');
  const NOTED = 'shop.confirming'; // the client secret of a confirm that may have left for 3-D Secure
  window.shop = { sp, card, secret };
  const outcomeText = (r) => r.error ? 'error ' + r.error.code + (r.error.decline_code ? ' ' + r.error.decline_code : '') :
    r.payment.status === 'requires_action' ? 'authentication pending' :
    r.payment.status + (r.payment.last_payment_error ? ' ' + r.payment.last_payment_error.decline_code : '');
  // readBack shows the payment of a confirm that left for 3-D Secure.
  // The address's redirect_status only says to look: the page believes
  // the payment it reads.
  const readBack = async (via) => {
    if (!q.has('redirect_status') && sessionStorage.getItem(NOTED) !== secret) return;
    const out = $('returned');
    const r = await sp.retrievePayment(secret);
    const na = r.payment && r.payment.status === 'requires_action' && r.payment.next_action;
    if (na && na.redirect_to_url) {
      $('resume').href = na.redirect_to_url.url;
      $('resume').hidden = false;
    } else {
      $('resume').hidden = true;
      if (!r.error || r.payment) sessionStorage.removeItem(NOTED);
    }
    out.textContent = outcomeText(r);
    out.dataset.via = via;
    out.dataset.n = String(Number(out.dataset.n) + 1);
  };
  window.addEventListener('pageshow', (ev) => { if (ev.persisted) readBack('restored'); });
  card.on('change', (e) => { $('status').textContent = e.error ? e.error.message : (e.complete ? 'Card complete' : ''); });
  card.on('error', (e) => { $('status').textContent = 'error ' + e.error.code; });
  card.mount('#card').then(
    () => { document.body.dataset.mounted = 'ready'; readBack(q.has('redirect_status') ? 'return' : 'load'); },
    (err) => { document.body.dataset.mounted = 'error ' + err.code; });
  $('pay').addEventListener('click', async () => {
    const out = $('result');
    let text;
    try {
      sessionStorage.setItem(NOTED, secret);
      const r = await sp.confirmPayment(secret, { card });
      sessionStorage.removeItem(NOTED); // answered here: the page did not leave
      text = outcomeText(r);
    } catch (err) {
      text = 'thrown ' + err.code;
    }
    out.textContent = text;
    out.dataset.n = String(Number(out.dataset.n) + 1);
  });
  $('check').addEventListener('click', async () => {
    const out = $('checked');
    const r = await sp.retrievePayment(secret);
    out.textContent = r.error ? 'error ' + r.error.code : r.payment.status + ' ' + r.payment.amount + ' ' + r.payment.currency;
    out.dataset.n = String(Number(out.dataset.n) + 1);
  });
}
`

const shopCSS = `body { font-family: sans-serif; margin: 2rem auto; max-width: 28rem; color: #222; }
#card { margin: 1rem 0; padding: 0.5rem; border: 1px solid #ddd; border-radius: 8px; }
button { font-size: 1rem; padding: 0.6rem 1.2rem; }
#result { font-weight: bold; }
#check { margin-left: 0.5rem; }
`
