// Package upkeep is serve's background upkeep of the engine: the purge of
// expired idempotency records, in bounded batches with pauses between
// them, and the count of enabled merchants that sizes each one's share of
// the node.
package upkeep

import (
	"context"
	"log/slog"
	"time"

	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/telemetry"
)

// The purge of idempotency records older than idempotency_retention.
// Once the retention has passed, records expire as fast as sales came
// in: 300,000 a minute at 5,000 sales/s. One delete of 10,000 every 10
// minutes, as before, fell behind by 3 M records each time. So each pass
// deletes batches until one comes back short (nothing more has expired),
// and pauses between them: a batch is one short transaction on the
// store's writer (SQLite has one), and the pause lets the payments queued
// behind it go first.
const (
	// PurgeInterval is the time between two passes.
	PurgeInterval = time.Minute
	// purgeBatchMax bounds the records one delete removes (the SQLite
	// store takes up to sqlite.PurgeLimitMax): a short write.
	purgeBatchMax = 1_000
	// purgeBatchPause is the pause between two batches of a pass. With it
	// a pass deletes at most 100,000 records a second, 20 times the rate
	// at which records of a 5,000 sales/s surge expire.
	purgeBatchPause = 10 * time.Millisecond
	// purgePassBatchesMax bounds one pass: 1,000 batches, 1 M records,
	// about three times what expires in a PurgeInterval at 5,000
	// sales/s. A pass that reaches it says so in the log (the purge is
	// behind), and the next pass goes on.
	purgePassBatchesMax = 1_000
)

// Purger deletes expired idempotency records, in passes of batches.
type Purger struct {
	// purge deletes up to limit expired records and returns how many it
	// deleted: engine.PurgeIdempotency.
	purge          func(ctx context.Context, limit int) (int, error)
	batchMax       int
	pause          time.Duration
	passBatchesMax int
	onPurged       func(n int) // counts deleted records (telemetry)
	log            *slog.Logger
	// newLease, if set, makes Run's passes run on the node that holds the
	// lease "purge" of a shared store (engine.Lease).
	newLease func(name string, interval time.Duration) *engine.Lease
}

// NewPurger returns serve's Purger of eng's records, with the bounds
// above, counting what it deletes in tel.
func NewPurger(eng *engine.Engine, tel *telemetry.Telemetry, log *slog.Logger) *Purger {
	return &Purger{purge: eng.PurgeIdempotency, batchMax: purgeBatchMax, pause: purgeBatchPause,
		passBatchesMax: purgePassBatchesMax, onPurged: tel.ObserveIdempotencyPurged, log: log, newLease: eng.NewLease}
}

// Run makes a pass every interval until ctx ends; on a shared store, on
// the one node that holds the lease "purge".
func (p *Purger) Run(ctx context.Context, interval time.Duration) {
	var lease *engine.Lease // nil: every pass runs here
	if p.newLease != nil {
		lease = p.newLease("purge", interval)
	}
	engine.RunEvery(ctx, interval, lease, func(ctx context.Context) {
		n, batches, err := p.pass(ctx)
		switch {
		case ctx.Err() != nil:
			if n > 0 { // what was deleted before the end is still told
				p.log.Info("purged idempotency records", "count", n, "batches", batches)
			}
		case err != nil:
			p.log.Warn("purge idempotency records", "err", err.Error(), "count", n)
		case batches == p.passBatchesMax:
			p.log.Warn("purge idempotency records: behind; the next pass goes on", "count", n, "batches", batches)
		case n > 0:
			p.log.Info("purged idempotency records", "count", n, "batches", batches)
		}
	})
}

// pass deletes expired records, batchMax at a time, until a batch comes
// back short, passBatchesMax batches have run, a delete fails or ctx
// ends, pausing between batches. It returns the records deleted and the
// batches run.
func (p *Purger) pass(ctx context.Context) (purged, batches int, err error) {
	for batches < p.passBatchesMax {
		if batches > 0 && !sleep(ctx, p.pause) {
			return purged, batches, ctx.Err()
		}
		n, err := p.purge(ctx, p.batchMax)
		batches++
		purged += n
		if n > 0 {
			p.onPurged(n)
		}
		if err != nil || n < p.batchMax {
			return purged, batches, err
		}
	}
	return purged, batches, nil
}

// sleep waits d, and reports false at once if ctx has ended or ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
