package upkeep

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
	"github.com/surgepay/surgepay/vault"
)

// fakeClock is an engine's clock that tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// purgeFixture is an engine on store whose clock the test sets, with one
// merchant, and idempotency records made at chosen times.
type purgeFixture struct {
	store surgepay.Store
	eng   *engine.Engine
	clock *fakeClock
	call  engine.Call
}

func newPurgeFixture(t *testing.T, store surgepay.Store) *purgeFixture {
	t.Helper()
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	f := &purgeFixture{store: store, clock: &fakeClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}}
	f.eng, err = engine.New(engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: keys,
		Now: f.clock.Now, IdempotencyRetention: surgepay.IdempotencyRetentionMin})
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.eng.CreateMerchant(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	f.call = engine.Call{MerchantID: m.ID,
		Render: func(v any, err error) (int, []byte) { return 200, []byte(`{"object":"customer"}`) }}
	return f
}

// records stores n idempotency records (customers created with a key)
// at time at, keyed prefix-0 to prefix-(n-1).
func (f *purgeFixture) records(t *testing.T, at time.Time, prefix string, n int) []string {
	t.Helper()
	f.clock.Set(at)
	keys := make([]string, n)
	for i := range keys {
		call := f.call
		call.IdempotencyKey = fmt.Sprintf("%s-%d", prefix, i)
		if _, err := f.eng.CreateCustomer(t.Context(), &call, &engine.CustomerInput{Name: "Ada"}); err != nil {
			t.Fatal(err)
		}
		keys[i] = call.IdempotencyKey
	}
	return keys
}

// stored reports which of keys the store still holds a record for.
func (f *purgeFixture) stored(t *testing.T, keys []string) (kept int) {
	t.Helper()
	for _, k := range keys {
		_, err := f.store.FindIdempotency(t.Context(), f.call.MerchantID, k)
		switch {
		case err == nil:
			kept++
		case surgepay.ErrorCode(err) != surgepay.ENOTFOUND:
			t.Fatal(err)
		}
	}
	return kept
}

// TestPurgePass: with a 24 h retention, a pass at T+25h deletes the 25
// records made at T, in batches of 10 until one comes back short (3
// batches: 10, 10, 5), counts them, and keeps the 5 made at T+2h (23 h
// old).
func TestPurgePass(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			f := newPurgeFixture(t, b.Open(t))
			t0 := f.clock.Now()
			old := f.records(t, t0, "old", 25)
			recent := f.records(t, t0.Add(2*time.Hour), "recent", 5)
			f.clock.Set(t0.Add(surgepay.IdempotencyRetentionMin + time.Hour))

			var limits []int
			counted := 0
			p := &Purger{purge: func(ctx context.Context, limit int) (int, error) {
				limits = append(limits, limit)
				return f.eng.PurgeIdempotency(ctx, limit)
			}, batchMax: 10, passBatchesMax: 100, onPurged: func(n int) { counted += n }, log: slog.New(slog.DiscardHandler)}
			purged, batches, err := p.pass(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if purged != 25 || batches != 3 || counted != 25 {
				t.Errorf("pass = %d purged in %d batches (%d counted), want 25 in 3 (10, 10, 5), 25 counted", purged, batches, counted)
			}
			for i, l := range limits {
				if l != 10 {
					t.Errorf("batch %d limit %d, want 10 (batchMax)", i, l)
				}
			}
			if kept := f.stored(t, old); kept != 0 {
				t.Errorf("%d of %d records older than the retention kept, want none", kept, len(old))
			}
			if kept := f.stored(t, recent); kept != len(recent) {
				t.Errorf("%d of %d records within the retention kept, want all", kept, len(recent))
			}

			purged, batches, err = p.pass(t.Context())
			if err != nil || purged != 0 || batches != 1 {
				t.Errorf("second pass = %d purged in %d batches, %v; want 0 in 1 (nothing left)", purged, batches, err)
			}
		})
	}
}

// TestPurgePassBounded: a pass runs at most passBatchesMax batches and
// the next pass goes on; a pass whose context ends between batches stops
// there.
func TestPurgePassBounded(t *testing.T) {
	f := newPurgeFixture(t, testenv.OpenSQLite(t))
	t0 := f.clock.Now()
	old := f.records(t, t0, "old", 25)
	f.clock.Set(t0.Add(surgepay.IdempotencyRetentionMin + time.Hour))
	p := &Purger{purge: f.eng.PurgeIdempotency, batchMax: 5, passBatchesMax: 2, onPurged: func(int) {},
		log: slog.New(slog.DiscardHandler)}
	if purged, batches, err := p.pass(t.Context()); purged != 10 || batches != 2 || err != nil {
		t.Errorf("pass = %d purged in %d batches, %v; want 10 in 2 (passBatchesMax)", purged, batches, err)
	}
	if kept := f.stored(t, old); kept != 15 {
		t.Errorf("%d records kept after the bounded pass, want 15", kept)
	}

	ctx, cancel := context.WithCancel(t.Context())
	p.passBatchesMax = 100
	p.purge = func(c context.Context, limit int) (int, error) {
		cancel() // the context ends during the first batch
		return f.eng.PurgeIdempotency(c, limit)
	}
	purged, batches, err := p.pass(ctx)
	if purged != 5 || batches != 1 || err != context.Canceled {
		t.Errorf("pass with its context ended = %d purged in %d batches, %v; want 5 in 1, context.Canceled", purged, batches, err)
	}
}

// TestPurgeRun: serve's loop makes passes on its interval, logs what it
// deleted, and returns when its context ends.
func TestPurgeRun(t *testing.T) {
	f := newPurgeFixture(t, testenv.OpenSQLite(t))
	t0 := f.clock.Now()
	old := f.records(t, t0, "old", 12)
	f.clock.Set(t0.Add(surgepay.IdempotencyRetentionMin + time.Hour))
	var logs telemetrytest.SyncBuffer
	p := NewPurger(f.eng, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	p.batchMax = 5
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, time.Millisecond) }()
	const want = `msg="purged idempotency records" count=12 batches=3`
	// The records go before the pass logs them: wait for the log line.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if kept := f.stored(t, old); kept != 0 {
		t.Errorf("%d of %d expired records kept by the loop, want none", kept, len(old))
	}
	if !strings.Contains(logs.String(), want) {
		t.Errorf("logs = %q, want one pass of 12 records in 3 batches", logs.String())
	}
}
