package engine_test

import (
	"context"
	"errors"
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

// redisSeenWait bounds how long an invalidation pushed by Redis takes to
// reach another process's client-side copy (milliseconds in practice).
const redisSeenWait = 5 * time.Second

// twoNodes returns two engines on one store and keyring, as two servers
// of one deployment, each with its own cache made by mk.
func twoNodes(t *testing.T, mk func() *cache.Cache) (a, b *engine.Engine) {
	t.Helper()
	store := testenv.OpenSQLite(t)
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []**engine.Engine{&a, &b} {
		if *e, err = engine.New(engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: keys, Cache: mk()}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func redisCache(t *testing.T, addr string) func() *cache.Cache {
	return func() *cache.Cache {
		cfg := cache.DefaultConfig()
		cfg.Redis.GlobalAddrs = []string{addr}
		e := cfg.Entities[cache.APIKeys]
		e.Scope = cache.ScopeGlobal
		cfg.Entities[cache.APIKeys] = e
		c, err := cache.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
}

// TestDisableMerchantSharedCache: with API keys cached in Redis (scope
// global), a merchant disabled on node B is refused on node A, which had
// the key cached, without waiting for the TTL; enabling it on B lets it
// back in on A. With keys cached in each process's memory and no
// credentials watch on A, A keeps accepting the key until the entity's
// TTL: the watch (RunCredentialsWatch, which serve runs) is what brings
// that down (TestCredentialChangesReachOtherEngines).
func TestDisableMerchantSharedCache(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	a, b := twoNodes(t, redisCache(t, srv.Addr))
	m, err := b.CreateMerchant(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := b.CreateAPIKey(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, secret); err != nil { // cached on A now
		t.Fatal(err)
	}
	eventually := func(what string, ok func(err error) bool) {
		t.Helper()
		deadline := time.Now().Add(redisSeenWait)
		for {
			_, err := a.Authenticate(ctx, secret)
			if ok(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Authenticate on A = %v after %v", what, err, redisSeenWait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := b.SetMerchantDisabled(ctx, m.ID, true); err != nil {
		t.Fatal(err)
	}
	eventually("disabled on B", func(err error) bool { return surgepay.ErrorReason(err) == "merchant_disabled" })
	if _, err := b.SetMerchantDisabled(ctx, m.ID, false); err != nil {
		t.Fatal(err)
	}
	eventually("enabled on B", func(err error) bool { return err == nil })

	t.Run("ProcessScopeWithoutWatchKeepsTheCopy", func(t *testing.T) {
		a, b := twoNodes(t, func() *cache.Cache {
			c, err := cache.New(cache.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return c
		})
		m, _ := b.CreateMerchant(ctx, "m")
		secret, _, _ := b.CreateAPIKey(ctx, m.ID)
		if _, err := a.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if _, err := b.SetMerchantDisabled(ctx, m.ID, true); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Authenticate(ctx, secret); surgepay.ErrorReason(err) != "merchant_disabled" {
			t.Errorf("B, which disabled it: %v, want merchant_disabled at once", err)
		}
		if _, err := a.Authenticate(ctx, secret); err != nil {
			t.Errorf("A with its own copy and no watch: %v; want accepted until the TTL", err)
		}
	})
}

// TestLifecycleAuditTrail: each change writes one audit row with its
// actor; a no-op (disabling a disabled merchant, revoking a revoked key)
// writes none; no row holds a secret.
func TestLifecycleAuditTrail(t *testing.T) {
	ctx := engine.WithActor(context.Background(), "cli:alice")
	eng, call := newEngine(t, testenv.OpenSQLite(t), nil)
	secret, k, err := eng.CreateAPIKeyWith(ctx, call.MerchantID, engine.KeyOptions{Scopes: []string{surgepay.ScopePaymentsRead},
		Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { _, err := eng.SetMerchantDisabled(ctx, call.MerchantID, true); return err },
		func() error { _, err := eng.SetMerchantDisabled(ctx, call.MerchantID, true); return err }, // no-op
		func() error { _, err := eng.SetMerchantDisabled(ctx, call.MerchantID, false); return err },
		func() error { _, err := eng.RollAPIKey(ctx, k.ID, time.Hour, time.Time{}); return err },
		func() error { _, err := eng.RevokeAPIKey(ctx, k.ID); return err },
		func() error { _, err := eng.RevokeAPIKey(ctx, k.ID); return err }, // no-op
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	es, _, err := eng.ListAuditEvents(ctx, surgepay.AuditFilter{MerchantID: call.MerchantID, Page: surgepay.Page{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Action)
		if e.Action != surgepay.AuditMerchantCreated && e.Actor != "cli:alice" {
			t.Errorf("%s: actor %q, want cli:alice", e.Action, e.Actor)
		}
		if len(secret) > 12 && (contains(e.Detail, secret[10:]) || contains(e.Actor, secret[10:])) {
			t.Errorf("%s holds the secret: %q", e.Action, e.Detail)
		}
	}
	want := []string{"api_key.revoked", "api_key.created", "api_key.rolled", "merchant.enabled", "merchant.disabled",
		"api_key.created", "merchant.created"}
	if len(got) != len(want) {
		t.Fatalf("audit actions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("audit actions %v, want %v", got, want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestLifecycleBadInput: what the CLI passes straight to the engine is
// refused with EINVALID naming the field: an empty name, control or
// bidirectional characters in a name, an unknown scope, an expiry in the
// past or too far, a grace out of bounds; a revoked key cannot be rolled
// or expired.
func TestLifecycleBadInput(t *testing.T) {
	ctx := context.Background()
	eng, call := newEngine(t, testenv.OpenSQLite(t), nil)
	_, k, err := eng.CreateAPIKey(ctx, call.MerchantID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, param, reason string
		err                 error
	}{
		{"EmptyName", "name", "parameter_missing", second(eng.CreateMerchant(ctx, " "))},
		{"BidiName", "name", "invalid_characters", second(eng.CreateMerchant(ctx, "Shop\u202egnp.exe"))},
		{"ControlName", "name", "invalid_characters", second(eng.CreateMerchant(ctx, "Shop\x1b[31m"))},
		{"UnknownScope", "scopes", "invalid_scope", third(eng.CreateAPIKeyWith(ctx, call.MerchantID, engine.KeyOptions{Scopes: []string{"root"}}))},
		{"ExpiryPast", "expires_at", "invalid_value", third(eng.CreateAPIKeyWith(ctx, call.MerchantID, engine.KeyOptions{Expires: time.Now().Add(-time.Second)}))},
		{"ExpiryTooFar", "expires_at", "invalid_value", third(eng.CreateAPIKeyWith(ctx, call.MerchantID,
			engine.KeyOptions{Expires: time.Now().Add(engine.APIKeyLifetimeMax + time.Hour)}))},
		{"GraceNegative", "grace", "invalid_value", second(eng.RollAPIKey(ctx, k.ID, -time.Second, time.Time{}))},
		{"GraceTooLong", "grace", "invalid_value", second(eng.RollAPIKey(ctx, k.ID, engine.APIKeyRollGraceMax+time.Second, time.Time{}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *surgepay.Error
			if !asError(tc.err, &e) || e.Code != surgepay.EINVALID || e.Param != tc.param || e.Reason != tc.reason {
				t.Errorf("got %v, want invalid %s %s", tc.err, tc.param, tc.reason)
			}
		})
	}
	if _, err := eng.RevokeAPIKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.RollAPIKey(ctx, k.ID, time.Hour, time.Time{}); surgepay.ErrorReason(err) != "api_key_revoked" {
		t.Errorf("roll of a revoked key: %v, want api_key_revoked", err)
	}
	if _, err := eng.ExpireAPIKey(ctx, k.ID, time.Now().Add(time.Hour)); surgepay.ErrorReason(err) != "api_key_revoked" {
		t.Errorf("expire of a revoked key: %v, want api_key_revoked", err)
	}
	if _, err := eng.SetMerchantDisabled(ctx, "mer_unknown", true); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Errorf("disable an unknown merchant: %v, want not found", err)
	}
}

func second[A any](_ A, err error) error { return err }

func third[A, B any](_ A, _ B, err error) error { return err }

func asError(err error, e **surgepay.Error) bool {
	var x *surgepay.Error
	ok := errors.As(err, &x)
	*e = x
	return ok
}
