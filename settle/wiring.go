package settle

import (
	"context"
	"sync"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/telemetry"
)

// OpenConsumer opens the stage settlement reads: "jetstream" with jc (its
// URL, AckWait, credentials and TLS files), else the embedded stage of
// store with jc.AckWait. release closes it.
func OpenConsumer(ctx context.Context, kind string, jc jetstream.Config, store surgepay.Store) (c surgepay.StageConsumer, release func(), err error) {
	if kind == "jetstream" {
		js, err := jetstream.Open(ctx, jc)
		if err != nil {
			return nil, nil, err
		}
		return js, func() { _ = js.Close() }, nil // nothing is left to tell at release: the stage reads are over
	}
	emb, err := stage.NewEmbedded(store, jc.AckWait)
	if err != nil {
		return nil, nil, err
	}
	return emb, func() {}, nil
}

// Latest holds the latest Stats for a /metrics listener of settlement.
// Safe for concurrent use.
type Latest struct {
	mu   sync.Mutex
	last telemetry.SettleStat
}

// Observe is a Config.OnStats.
func (m *Latest) Observe(s Stats) {
	st := telemetry.SettleStat{BacklogDepth: s.BacklogDepth, OldestAge: s.OldestAge, LastBatchSize: s.LastBatchSize,
		CapturesPerSecond: s.CapturesPerSecond, Captured: s.Captured, Failed: s.Failed, Left: s.Left,
		Failures: s.Failures} // a copy of settle's, never changed after
	m.mu.Lock()
	m.last = st
	m.mu.Unlock()
}

// Stat returns the latest Stats for telemetry.
func (m *Latest) Stat() telemetry.SettleStat {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}
