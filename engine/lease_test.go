package engine_test

import (
	"testing"
	"time"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// TestLeaseOneNodeAtATime: engines sharing a PostgreSQL store (three
// nodes) run a leased piece of work on one of them at a time; a node that
// releases its lease at shutdown hands it over at the next node's pass.
// On SQLite, a store one node owns, the work always runs.
func TestLeaseOneNodeAtATime(t *testing.T) {
	for _, be := range testenv.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			store := be.Open(t)
			keys, err := vault.Generate()
			if err != nil {
				t.Fatal(err)
			}
			leases := make([]*engine.Lease, 3)
			for i := range leases {
				c, err := cache.New(cache.DefaultConfig())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				e, err := engine.New(engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: keys, Cache: c})
				if err != nil {
					t.Fatal(err)
				}
				leases[i] = e.NewLease("reconciler", time.Second)
			}
			held := func(ls ...*engine.Lease) []bool {
				out := make([]bool, len(ls))
				for i, l := range ls {
					out[i] = l.Held(t.Context())
				}
				return out
			}
			if be.Name == "sqlite" {
				for i, h := range held(leases...) {
					if !h {
						t.Errorf("node %d: the lease of an unshared store not held", i)
					}
				}
				return
			}
			for pass := range 3 {
				if got := held(leases...); !got[0] || got[1] || got[2] {
					t.Fatalf("pass %d: held %v, want the first node's alone", pass, got)
				}
			}
			leases[0].Release()
			if got := held(leases[1:]...); !got[0] || got[1] {
				t.Fatalf("after the first node released: held %v by the others, want the second's alone", got)
			}
		})
	}
}
