package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// credentialsSeenWait bounds how long the tests wait for a change made by
// one engine to be refused by another: far below the api_keys TTL (5
// minutes), so that only the credentials watch can pass them, and far
// above its poll interval, so that a loaded machine does not fail them.
const credentialsSeenWait = 10 * time.Second

// TestCredentialChangesReachOtherEngines: a key revoked, expired or rolled,
// or a merchant disabled, by one engine (the CLI, or another server) is
// refused by another engine sharing the store, which had the key cached in
// its own memory (the default process scope, TTL 5 minutes), as soon as
// its credentials watch polls: it used to be accepted until the TTL
// (issue 34: 299 s). Enabling the merchant again lets the key back in, and
// the other keys keep working throughout.
func TestCredentialChangesReachOtherEngines(t *testing.T) {
	for _, be := range testenv.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			store := be.Open(t)
			keys, err := vault.Generate()
			if err != nil {
				t.Fatal(err)
			}
			newEngine := func() *engine.Engine {
				c, err := cache.New(cache.DefaultConfig())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				e, err := engine.New(engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: keys, Cache: c})
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			srv, cli := newEngine(), newEngine()
			wctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); srv.RunCredentialsWatch(wctx, 10*time.Millisecond) }()
			t.Cleanup(func() { stop(); <-done })

			m, err := cli.CreateMerchant(ctx, "m")
			if err != nil {
				t.Fatal(err)
			}
			newKey := func() (string, *surgepay.APIKey) {
				t.Helper()
				secret, k, err := cli.CreateAPIKey(ctx, m.ID)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := srv.Authenticate(ctx, secret); err != nil { // cached by srv now
					t.Fatal(err)
				}
				return secret, k
			}
			eventually := func(what, secret, reason string) {
				t.Helper()
				deadline := time.Now().Add(credentialsSeenWait)
				for {
					_, err := srv.Authenticate(ctx, secret)
					if surgepay.ErrorReason(err) == reason {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s by another engine: Authenticate = %v after %v, want %q", what, err, credentialsSeenWait, reason)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			bystander, _ := newKey()

			secret, k := newKey()
			if _, err := cli.RevokeAPIKey(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
			eventually("revoked", secret, "invalid_api_key")

			secret, k = newKey()
			if _, err := cli.ExpireAPIKey(ctx, k.ID, srv.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			eventually("expired", secret, "api_key_expired")

			secret, k = newKey()
			rolled, err := cli.RollAPIKey(ctx, k.ID, 0, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			eventually("rolled with no grace", secret, "invalid_api_key")
			if _, err := srv.Authenticate(ctx, rolled.Secret); err != nil {
				t.Fatalf("the rolled key's new secret: %v", err)
			}

			secret, _ = newKey()
			if _, err := cli.SetMerchantDisabled(ctx, m.ID, true); err != nil {
				t.Fatal(err)
			}
			eventually("merchant disabled", secret, "merchant_disabled")
			if _, err := cli.SetMerchantDisabled(ctx, m.ID, false); err != nil {
				t.Fatal(err)
			}
			eventually("merchant enabled", secret, "")
			if _, err := srv.Authenticate(ctx, bystander); err != nil {
				t.Errorf("a key nobody changed: %v", err)
			}
		})
	}
}
