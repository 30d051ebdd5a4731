package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
	"github.com/surgepay/surgepay/webhook"
)

// env is surgepay (engine on a fresh SQLite store, the simulator, the API
// with its checkout routes, the webhook outbox and dispatcher) on one
// 127.0.0.1 listener, and the example shop on another: a different
// origin, the merchant's one checkout origin, with a webhook endpoint
// pointing at the shop's /webhooks.
type env struct {
	t      *testing.T
	sim    *sim.Provider
	api    string // surgepay's origin
	shop   *Shop
	url    string // the shop's origin
	secret string // the merchant's secret key
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store := testenv.OpenSQLite(t)
	ws := store.(surgepay.WebhookStore)
	outbox := webhook.NewOutbox(webhook.OutboxConfig{Store: ws, RenderPayment: api.PaymentObject})
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sim: sim.New(sim.DefaultConfig())}
	eng, err := engine.New(engine.Config{Store: store, Provider: e.sim, Vault: keys, Outbox: outbox})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := eng.CreateMerchant(ctx, "Example shop")
	if err != nil {
		t.Fatal(err)
	}
	if e.secret, _, err = eng.CreateAPIKey(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	pk, _, err := eng.CreateAPIKeyWith(ctx, m.ID, engine.KeyOptions{Publishable: true})
	if err != nil {
		t.Fatal(err)
	}
	e.api = serve(t, listen(t), api.New(api.Config{Engine: eng}))

	// The shop's origin must be known before the endpoint (its URL) and
	// the merchant's checkout_origins.
	ln := listen(t)
	e.url = "http://" + ln.Addr().String()
	s := surgepay.DefaultMerchantSettings()
	s.CheckoutOrigins = []string{e.url}
	eng.SetSettings(&engine.Settings{Default: surgepay.DefaultMerchantSettings(),
		Merchants: map[string]surgepay.MerchantSettings{m.ID: s}})
	var we struct{ Secret string }
	if code, body := e.do("POST", "/v1/webhook_endpoints", map[string]string{"url": e.url + "/webhooks"}, &we); code != 200 {
		t.Fatalf("POST /v1/webhook_endpoints = %d: %s", code, body)
	}
	if e.shop, err = newShop(Config{API: e.api, SecretKey: e.secret, PublishableKey: pk, WebhookSecret: we.Secret}); err != nil {
		t.Fatal(err)
	}
	serve(t, ln, e.shop.Handler())
	e.dispatch(ws, keys, outbox)
	return e
}

// dispatch runs surgepay's webhook dispatcher, as serve does, until the
// test ends: woken by each payment change, allowed to reach 127.0.0.1.
func (e *env) dispatch(ws surgepay.WebhookStore, keys surgepay.Vault, outbox *webhook.Outbox) {
	e.t.Helper()
	if err := outbox.Refresh(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	d, err := webhook.New(webhook.Config{Store: ws, Vault: keys, AllowPrivateNetworks: true, Wake: outbox.Wake(),
		PollInterval: 100 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done }) // before the store closes
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// serve serves h on ln until the test ends and returns its origin.
func serve(t *testing.T, ln net.Listener, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// do calls surgepay's API with the merchant's secret key and decodes a
// 200 answer into out (if not nil); it returns the status and the body.
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

// paymentStatus reads an order's payment through the API.
func (e *env) paymentStatus(orderID string) (paymentID, status string) {
	e.t.Helper()
	o, ok := e.shop.orders.get(orderID)
	if !ok || o.PaymentID == "" {
		e.t.Fatalf("the shop has no order %q with a payment", orderID)
	}
	var p struct{ Status string }
	if code, body := e.do("GET", "/v1/payments/"+o.PaymentID, nil, &p); code != 200 {
		e.t.Fatalf("GET /v1/payments/%s = %d: %s", o.PaymentID, code, body)
	}
	return o.PaymentID, p.Status
}
