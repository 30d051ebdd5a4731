package api_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/vault"
)

// restarted returns e as served by a new engine on the same store, the
// same card network and the same vault keys (a restart, or a new node):
// its cache is empty until Preheat.
func (e *env) restarted(t *testing.T, keys *vault.Keyring, configure func(*engine.Config)) *env {
	t.Helper()
	cfg := engine.Config{Store: e.store, Provider: e.sim, Vault: keys}
	if configure != nil {
		configure(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Preheat(context.Background()); err != nil {
		t.Fatalf("Preheat: %v", err)
	}
	srv := httptest.NewServer(api.New(api.Config{Engine: eng, Debug: true}))
	t.Cleanup(srv.Close)
	r := *e
	r.t, r.url, r.eng, r.http = t, srv.URL, eng, srv.Client()
	return &r
}

// TestPreheatRecentCards restarts the server: the first payments with the
// most recently saved cards read nothing from the store (the API key and
// the card come from the preheated cache), and the preheat takes the
// newest cards across merchants up to its bound.
func TestPreheatRecentCards(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		keys, err := vault.Generate()
		if err != nil {
			t.Fatal(err)
		}
		e := newEnvWith(t, ee.store, func(c *engine.Config) { c.Vault = keys })
		// IDs sort by their millisecond: the cards are made milliseconds apart.
		cus, oldest := e.customerWithCard(e.keyA, "4242424242424242")
		time.Sleep(2 * time.Millisecond)
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242")
		time.Sleep(2 * time.Millisecond)
		_, newest := e.customerWithCard(e.keyA, "5555555555554444")

		pay := func(e *env, key, cus, pm string) string {
			t.Helper()
			r := e.do(key, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic"), "")
			if r.Status != 200 {
				t.Fatalf("payment: %d %s", r.Status, r.Raw)
			}
			return r.Header.Get("Surgepay-Sql")
		}
		r := e.restarted(t, keys, nil)
		for _, c := range []struct{ key, cus, pm string }{{e.keyA, cus, oldest}, {e.keyB, cusB, pmB}, {e.keyA, "", newest}} {
			if sql := pay(r, c.key, c.cus, c.pm); !strings.Contains(sql, " select=0 ") {
				t.Errorf("first payment with %s after a restart: Surgepay-Sql %q, want select=0", c.pm, sql)
			}
		}

		// Bounded: with room for two cards, the two newest (one of B's
		// among them) are preheated, the oldest is read once.
		r = e.restarted(t, keys, func(c *engine.Config) { c.PreheatPaymentMethodsMax = 2 })
		if sql := pay(r, e.keyA, "", newest); !strings.Contains(sql, " select=0 ") {
			t.Errorf("newest card, bound 2: Surgepay-Sql %q, want select=0", sql)
		}
		if sql := pay(r, e.keyB, cusB, pmB); !strings.Contains(sql, " select=0 ") {
			t.Errorf("merchant B's card, bound 2: Surgepay-Sql %q, want select=0", sql)
		}
		if sql := pay(r, e.keyA, cus, oldest); !strings.Contains(sql, " select=1 ") {
			t.Errorf("oldest card, bound 2: Surgepay-Sql %q, want select=1 (not preheated)", sql)
		}
		r = e.restarted(t, keys, func(c *engine.Config) { c.PreheatPaymentMethodsMax = -1 })
		if sql := pay(r, e.keyA, "", newest); !strings.Contains(sql, " select=1 ") {
			t.Errorf("preheat off: Surgepay-Sql %q, want select=1", sql)
		}
	})
}
