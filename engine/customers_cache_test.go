package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/cache/redistest"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// newEngine returns an engine on store with the cache c (nil: the
// default, process scope) and one merchant.
func newEngine(t *testing.T, store surgepay.Store, c *cache.Cache) (*engine.Engine, *engine.Call) {
	t.Helper()
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: keys, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eng.CreateMerchant(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	return eng, &engine.Call{MerchantID: m.ID}
}

func customerStat(t *testing.T, eng *engine.Engine) cache.Stat {
	t.Helper()
	for _, s := range eng.CacheStats() {
		if s.Entity == cache.Customers {
			return s
		}
	}
	t.Fatal("no stats for the customers entity")
	return cache.Stat{}
}

// TestCustomerCache: GetCustomer reads the store once, then the cache
// (counted as a miss, then a hit, of the customers entity); an update and
// a delete invalidate the cached customer, so the next read sees them.
func TestCustomerCache(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			eng, call := newEngine(t, b.Open(t), nil)
			c, err := eng.CreateCustomer(ctx, call, &engine.CustomerInput{Name: "Ada"})
			if err != nil {
				t.Fatal(err)
			}
			get := func() (*surgepay.Customer, int, error) {
				sc := &surgepay.StatementCounter{}
				got, err := eng.GetCustomer(surgepay.WithStatementCounter(ctx, sc), call, c.ID)
				return got, int(sc.Kind(surgepay.StmtSelect)), err
			}
			for i, wantSelects := range []int{1, 0} {
				got, selects, err := get()
				if err != nil || got.Name != "Ada" {
					t.Fatalf("GetCustomer %d = %+v, %v; want Ada", i, got, err)
				}
				if selects != wantSelects {
					t.Errorf("GetCustomer %d: %d SELECTs, want %d", i, selects, wantSelects)
				}
			}
			if s := customerStat(t, eng); s.Hits != 1 || s.Misses != 1 || s.Scope != cache.ScopeProcess {
				t.Errorf("customers stats = %+v, want 1 hit, 1 miss, process scope", s)
			}

			name := "Grace"
			if _, err := eng.UpdateCustomer(ctx, call, c.ID, &surgepay.CustomerUpdate{Name: &name}); err != nil {
				t.Fatal(err)
			}
			if got, _, err := get(); err != nil || got.Name != "Grace" {
				t.Fatalf("GetCustomer after the update = %+v, %v; want Grace (the cached Ada invalidated)", got, err)
			}
			if s := customerStat(t, eng); s.Invalidations == 0 {
				t.Errorf("customers Invalidations = 0 after an update, want > 0")
			}

			if _, err := eng.DeleteCustomer(ctx, call, c.ID); err != nil {
				t.Fatal(err)
			}
			if got, _, err := get(); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
				t.Fatalf("GetCustomer after the delete = %+v, %v; want not_found", got, err)
			}
		})
	}
}

// TestPreheatWithRedisDown: with the shared scopes' Redis down at start,
// Preheat still succeeds (the start goes on), the cache counts the
// fallbacks, and requests are answered from the store.
func TestPreheatWithRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	cfg := cache.DefaultConfig()
	cfg.Redis.GlobalAddrs = []string{srv.Addr}
	for name, e := range cfg.Entities {
		e.Scope = cache.ScopeGlobal
		cfg.Entities[name] = e
	}
	c, err := cache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	store := testenv.OpenSQLite(t)
	eng, call := newEngine(t, store, c)
	secret, _, err := eng.CreateAPIKey(context.Background(), call.MerchantID)
	if err != nil {
		t.Fatal(err)
	}
	cus, err := eng.CreateCustomer(context.Background(), call, &engine.CustomerInput{Name: "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	card := surgepay.CardInput{Number: "4242424242424242", ExpMonth: 12, ExpYear: time.Now().Year() + 2, CVC: "123"}
	if _, err := eng.CreatePaymentMethod(context.Background(), call, &engine.CardInput{CustomerID: cus.ID, Card: card}); err != nil {
		t.Fatal(err)
	}

	fallbacks := func() (n uint64) {
		for _, s := range eng.CacheStats() {
			n += s.Fallbacks
		}
		return n
	}
	before := fallbacks()
	if err := eng.Preheat(context.Background()); err != nil {
		t.Fatalf("Preheat with Redis down = %v, want nil: a cache failure must not stop the start", err)
	}
	if fallbacks() == before {
		t.Error("no fallback counted by a preheat with Redis down")
	}
	if k, err := eng.Authenticate(context.Background(), secret); err != nil || k.MerchantID != call.MerchantID {
		t.Errorf("Authenticate with Redis down = %+v, %v; want the key", k, err)
	}
	if got, err := eng.GetCustomer(context.Background(), call, cus.ID); err != nil || got.Name != "Ada" {
		t.Errorf("GetCustomer with Redis down = %+v, %v; want Ada", got, err)
	}
}
