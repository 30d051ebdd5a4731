package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/webhook"
)

// TestServeWebhooks runs `surgepay serve` with a receiver on 127.0.0.1:
// an endpoint registered through the API gets a purchase's event, signed
// with its secret, and the delivery shows in /metrics.
func TestServeWebhooks(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*http.Request
			var bodies [][]byte
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				got, bodies = append(got, r), append(bodies, body)
				mu.Unlock()
			}))
			defer rcv.Close()
			dir := t.TempDir()
			env := b.env(t)
			if env == nil {
				env = map[string]string{}
			}
			env["SURGEPAY_WEBHOOKS_ALLOW_PRIVATE_NETWORKS"] = "true"
			cfg := testConfig(t, dir, env)
			s := startServe(t, cfg)
			c := newClient(s.url, readDevKey(t, dir))
			var ep struct {
				ID, Secret string
			}
			c.must(t, "POST", "/v1/webhook_endpoints", "", map[string]any{"url": rcv.URL + "/hooks"}, 200, &ep)
			var cus, pm, pay object
			c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, 200, &cus)
			c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
				"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030}}, 200, &pm)
			c.must(t, "POST", "/v1/payments", "k-1", map[string]any{"amount": 1500, "currency": "usd",
				"payment_method": pm.ID}, 200, &pay)

			metrics := "http://" + cfg.AdminListen + "/metrics"
			deadline := time.Now().Add(requestTimeout)
			for {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				if _, text := getAuth(t, metrics, readAdminToken(t, dir)); n > 0 &&
					strings.Contains(text, `surgepay_webhook_deliveries_total{outcome="delivered"} 1`) {
					break
				}
				if time.Now().After(deadline) {
					_, text := getAuth(t, metrics, readAdminToken(t, dir))
					t.Fatalf("no delivery recorded within %s: %d requests; metrics:\n%s", requestTimeout, n, text)
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			r, body := got[0], bodies[0]
			mu.Unlock()
			if err := webhook.Verify([]byte(ep.Secret), r.Header.Get(webhook.HeaderSignature), body, 5*time.Minute, time.Now()); err != nil {
				t.Errorf("signature: %v", err)
			}
			if !strings.Contains(string(body), `"type":"payment.succeeded"`) || !strings.Contains(string(body), pay.ID) {
				t.Errorf("body %s: want payment.succeeded of %s", body, pay.ID)
			}
			if err := s.stop(); err != nil {
				t.Fatalf("serve returned %v after its context ended, want nil", err)
			}
			if strings.Contains(s.logs.String(), ep.Secret) || strings.Contains(s.out.String(), ep.Secret) {
				t.Error("serve's output holds the endpoint's secret")
			}
		})
	}
}

// settingsOf is the reloadable merchant settings of cfg, as settle holds them.
func settingsOf(cfg config.Config) *atomic.Pointer[engine.Settings] {
	var p atomic.Pointer[engine.Settings]
	p.Store(cfg.MerchantSettings())
	return &p
}

// TestSettleStoreQueuesWebhooks: the store settle writes through queues
// the webhook of a Write with audit events, keeps the store's
// capabilities, and queues nothing for a merchant whose switch is off;
// a reload of the settings (settle's SIGHUP) turns it on.
func TestSettleStoreQueuesWebhooks(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	on, off := surgepay.NewID("mer"), surgepay.NewID("mer")
	for _, m := range []string{on, off} {
		ep := &surgepay.WebhookEndpoint{ID: surgepay.NewID("we"), MerchantID: m, URL: "https://x.example.com/",
			SealedSecret: []byte{1}, Created: time.Now()}
		if err := db.Apply(ctx, &surgepay.Write{WebhookEndpointInsert: ep}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	offSet := surgepay.DefaultMerchantSettings()
	offSet.Webhooks = "off"
	cfg.Merchants[off] = offSet
	settings := settingsOf(cfg)
	st := withWebhooks(t.Context(), db, settings, slog.New(slog.DiscardHandler))
	if _, ok := st.(surgepay.StagedStore); !ok {
		t.Error("the store with webhooks lost the StagedStore capability")
	}
	apply := func(m string) *surgepay.Write {
		now := time.Now().UTC()
		p := &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: m, Amount: 100, Currency: "usd",
			Status: surgepay.StatusSucceeded, Path: "streamlined", Version: 1, Created: now, Updated: now,
			Transactions: []surgepay.Transaction{{ID: "txn_1", Type: surgepay.TxCapture, Status: surgepay.TxSucceeded, Amount: 100}}}
		w := &surgepay.Write{PaymentInsert: p, Events: []*surgepay.Event{{ID: surgepay.NewID("evt"), PaymentID: p.ID,
			MerchantID: m, Type: surgepay.TxCapture, FromStatus: surgepay.StatusSucceeded, ToStatus: surgepay.StatusSucceeded,
			Amount: 100, ActorKeyID: "settle", Created: now}}}
		if err := st.Apply(ctx, w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	for _, m := range []string{on, off} {
		if queued := apply(m).Webhook != nil; queued != (m == on) {
			t.Errorf("merchant with webhooks %s: queued = %v", map[bool]string{true: "on", false: "off"}[m == on], queued)
		}
	}
	if b, _ := db.WebhookBacklog(ctx); b.Pending != 1 {
		t.Errorf("backlog %+v, want 1 pending", b)
	}
	delete(cfg.Merchants, off) // the reloaded file: webhooks back on
	settings.Store(cfg.MerchantSettings())
	if apply(off).Webhook == nil {
		t.Error("after the reload, a merchant whose webhooks were turned on: nothing queued")
	}
}

// TestConfigWebhooks: the merchant switch inherits from the default and
// refuses other values; the dispatcher's settings are checked.
func TestConfigWebhooks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.toml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[merchants.default]\nwebhooks = \"off\"\n[merchants.\"mer_1\"]\naudit = \"minimal\"\n[merchants.\"mer_2\"]\nwebhooks = \"on\"\n")
	cfg, err := config.Load(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	set := cfg.MerchantSettings()
	if set.For("mer_1").Webhooks != "off" || set.For("mer_2").Webhooks != "on" || set.For("mer_3").Webhooks != "off" {
		t.Errorf("webhooks settings: default %q, mer_1 %q, mer_2 %q", set.Default.Webhooks, set.For("mer_1").Webhooks, set.For("mer_2").Webhooks)
	}
	for text, field := range map[string]string{
		"[merchants.default]\nwebhooks = \"maybe\"\n": "merchants.default.webhooks",
		"[webhooks]\nworkers = 0\n":                   "webhooks.workers",
		"[webhooks]\ntimeout = \"2m\"\n":              "webhooks.timeout",
	} {
		write(text)
		if _, err := config.Load(path, noEnv); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v, want one naming %s", text, err, field)
		}
	}
}

// TestSettleStoreQueuesWebhooksInBatches: where the PostgreSQL store
// stores settlement's Writes as one batch, the store settle writes through
// queues their webhooks too.
func TestSettleStoreQueuesWebhooksInBatches(t *testing.T) {
	db, _ := testenv.OpenPostgresSchema(t)
	if _, ok := db.(settlementWriter); !ok {
		t.Fatal("the PostgreSQL store lost its ApplySettlements: settlement batches would not queue webhooks this way")
	}
	ctx := context.Background()
	m := surgepay.NewID("mer")
	ep := &surgepay.WebhookEndpoint{ID: surgepay.NewID("we"), MerchantID: m, URL: "https://x.example.com/",
		SealedSecret: []byte{1}, Created: time.Now()}
	if err := db.Apply(ctx, &surgepay.Write{WebhookEndpointInsert: ep}); err != nil {
		t.Fatal(err)
	}
	st := withWebhooks(t.Context(), db, settingsOf(config.Default()), slog.New(slog.DiscardHandler))
	sw, ok := st.(settlementWriter)
	if !ok {
		t.Fatal("the store with webhooks lost ApplySettlements")
	}
	now := time.Now().UTC()
	p := &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: m, Amount: 100, Currency: "usd",
		Status: surgepay.StatusSucceeded, Path: "streamlined", Version: 1, Created: now, Updated: now,
		Transactions: []surgepay.Transaction{{ID: "txn_1", Type: surgepay.TxCapture, Status: surgepay.TxPending, Amount: 100}}}
	if err := db.Apply(ctx, &surgepay.Write{PaymentInsert: p}); err != nil {
		t.Fatal(err)
	}
	next := p.Clone()
	next.SettleCapture("ref_1", now)
	w := &surgepay.Write{PaymentUpdate: next, Events: []*surgepay.Event{{ID: surgepay.NewID("evt"), PaymentID: p.ID,
		MerchantID: m, Type: surgepay.TxCapture, FromStatus: surgepay.StatusSucceeded, ToStatus: surgepay.StatusSucceeded,
		Amount: 100, ActorKeyID: "settle", Created: now}}}
	stored, err := sw.ApplySettlements(ctx, []*surgepay.Write{w})
	if err != nil || len(stored) != 1 || !stored[0] {
		t.Fatalf("ApplySettlements = %v, %v", stored, err)
	}
	if w.Webhook == nil || w.Webhook.Type != surgepay.WebhookPaymentCaptured {
		t.Fatalf("webhook %+v, want payment.captured", w.Webhook)
	}
	if b, _ := db.(surgepay.WebhookStore).WebhookBacklog(ctx); b.Pending != 1 {
		t.Errorf("backlog %+v, want 1 pending", b)
	}
}
