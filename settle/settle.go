// Package settle is the batch settlement processor of the streamlined
// path: it fetches staged capture records from a stage, opens them with the
// settlement private key, captures each authorization at the provider and
// records the result.
//
// Exactly once: a record is acknowledged at the stage only after its
// payment's result is durable (on the embedded stage, in the same Write).
// A crash anywhere redelivers the record; the capture's deterministic
// provider key and the payment's staged-capture check make a re-run never
// capture twice.
//
// Run processes one batch at a time: Workers bound the provider calls, and
// each payment's result is one Store.Apply, all issued concurrently so the
// store group-commits them.
package settle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/stage"
)

// Defaults and limits. The batch size and workers are where BenchmarkSettle
// passed 20,000 captures/s on SQLite against the simulator at 0 ms (500
// and 64 gave 15-18k/s): a larger batch spreads each group commit and each
// fetch over more captures.
const (
	BatchSizeMaxDefault = 2000
	BatchSizeMaxLimit   = 10_000
	BatchWaitDefault    = 200 * time.Millisecond
	WorkersDefault      = 128
	WorkersMax          = 4096
	RetryMaxDefault     = 3
	RetryMaxLimit       = 20
	RetryBackoffDefault = 100 * time.Millisecond
	OrphanGraceDefault  = 2 * time.Minute
	// conflictRetryMax bounds reloads of a payment whose version moved.
	conflictRetryMax = 5
	// lookupTriesMax bounds lookups of an unknown capture outcome, as the
	// engine does within a request.
	lookupTriesMax = 3
	// stageErrorsMax ends Run after this many consecutive Fetch errors.
	stageErrorsMax = 10
	// backlogInterval spaces backlog queries (a COUNT on the embedded
	// stage) while records flow.
	backlogInterval = time.Second
	// Audit trail.
	EventCapture       = "capture"
	EventCaptureFailed = "capture_failed"
	Actor              = "settle"
)

// Failure reasons in Report.Failures.
const (
	ReasonTampered   = "tampered"    // the record failed to open; acknowledged, never captured
	ReasonWrongKey   = "wrong_key"   // sealed to another settlement key or format; left
	ReasonOrphan     = "orphan"      // no payment after the grace period; acknowledged
	ReasonOrphanWait = "orphan_wait" // no payment yet, within the grace period; left
	ReasonMismatch   = "mismatch"    // the instruction disagrees with the stored payment; left
	ReasonRetryLater = "retry_later" // the capture was not performed after the retries; left
	ReasonUnknown    = "unknown"     // the capture's outcome is still unknown; left
	ReasonKeyReused  = "key_reused"  // the provider refused the key's parameters; left
	ReasonStore      = "store_error" // reading or writing the store failed; left
	ReasonDeclined   = "declined:"   // + decline code: the payment moved to failed
)

// Config configures Run. Store, Provider, Opener and Consumer are
// required; zero values of the rest take the defaults.
type Config struct {
	Store    surgepay.Store
	Provider surgepay.Provider
	Opener   surgepay.Opener
	Consumer surgepay.StageConsumer
	// BatchSizeMax is the records fetched at once. Default 2000.
	BatchSizeMax int
	// BatchWait is how long a Fetch waits for the first record. Default 200ms.
	BatchWait time.Duration
	// Workers bounds concurrent provider calls. Default 128.
	Workers int
	// UntilEmpty stops Run once the stage holds nothing but the records
	// this run left for later. Otherwise Run continues until ctx ends.
	UntilEmpty bool
	// RetryMax is how many times a capture that was not performed is
	// retried within its batch before it is left for a later delivery.
	// Default 3; -1 means no retry.
	RetryMax int
	// RetryBackoff is the wait before the first retry, doubled on each.
	// Default 100ms.
	RetryBackoff time.Duration
	// OrphanGrace is how long a record whose payment is not stored is kept:
	// on JetStream the engine stages before it commits, and a payment that
	// never committed was never answered. Default 2m.
	OrphanGrace time.Duration
	// Logger logs per-record problems by record and payment ID only.
	// Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnStats, if set, is called after every batch (from Run's goroutine).
	OnStats func(Stats)
}

// Stats is live progress, for metrics.
type Stats struct {
	BacklogDepth      int           // records waiting at the stage (refreshed at most every second)
	OldestAge         time.Duration // age of the oldest waiting record
	LastBatchSize     int
	Captured          int64   // captures recorded by this run
	Failed            int64   // declined captures recorded by this run
	CapturesPerSecond float64 // over the last batch, fetch to acknowledgement
}

func (c *Config) defaults() error {
	if c.Store == nil || c.Provider == nil || c.Opener == nil || c.Consumer == nil {
		return errors.New("settle: Store, Provider, Opener and Consumer are required")
	}
	def := func(v *int, d, max int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 1 || *v > max {
			return fmt.Errorf("settle: %s %d must be 1 to %d", name, *v, max)
		}
		return nil
	}
	if err := def(&c.BatchSizeMax, BatchSizeMaxDefault, BatchSizeMaxLimit, "BatchSizeMax"); err != nil {
		return err
	}
	if err := def(&c.Workers, WorkersDefault, WorkersMax, "Workers"); err != nil {
		return err
	}
	switch {
	case c.RetryMax == 0:
		c.RetryMax = RetryMaxDefault
	case c.RetryMax == -1:
		c.RetryMax = 0
	case c.RetryMax < 0 || c.RetryMax > RetryMaxLimit:
		return fmt.Errorf("settle: RetryMax %d must be -1 to %d", c.RetryMax, RetryMaxLimit)
	}
	for _, d := range []struct {
		v *time.Duration
		d time.Duration
	}{{&c.BatchWait, BatchWaitDefault}, {&c.RetryBackoff, RetryBackoffDefault}, {&c.OrphanGrace, OrphanGraceDefault}} {
		if *d.v <= 0 {
			*d.v = d.d
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

type runner struct {
	cfg     Config
	inWrite stage.AcksInWrite // nil: acknowledge through the consumer
	sem     chan struct{}

	mu   sync.Mutex // guards rep and left
	rep  *Report
	left map[string]struct{} // records left for later and not acknowledged since

	stats       Stats
	backlogSeen time.Time
}

// Run settles staged captures until ctx ends or, with UntilEmpty, the
// stage is drained. It returns the report of what it did; its error is a
// configuration error or a stage that keeps failing. A batch in progress
// when ctx ends is finished (provider calls are not cancelled) but not
// retried.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, sem: make(chan struct{}, cfg.Workers), left: map[string]struct{}{},
		rep: newReport(cfg.Now())}
	r.inWrite, _ = cfg.Consumer.(stage.AcksInWrite)
	err := r.loop(ctx)
	r.finish(context.WithoutCancel(ctx))
	return r.rep, err
}

func (r *runner) loop(ctx context.Context) error {
	stageErrors := 0
	for ctx.Err() == nil {
		start := r.cfg.Now()
		recs, err := r.cfg.Consumer.Fetch(ctx, r.cfg.BatchSizeMax, r.cfg.BatchWait)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if stageErrors++; stageErrors >= stageErrorsMax {
				return fmt.Errorf("settle: fetch: %d errors in a row, last: %w", stageErrors, err)
			}
			r.cfg.Logger.Warn("settle: fetch", "err", err.Error())
			sleep(ctx, r.cfg.RetryBackoff<<min(stageErrors, 6))
			continue
		}
		stageErrors = 0
		if len(recs) == 0 {
			done, err := r.idle(ctx)
			if done || err != nil {
				return err
			}
			continue
		}
		captured := r.batch(ctx, recs)
		r.afterBatch(ctx, len(recs), captured, r.cfg.Now().Sub(start))
	}
	return nil
}

// idle refreshes the backlog after an empty fetch and reports whether an
// UntilEmpty run is done: nothing waits but what this run left for later.
func (r *runner) idle(ctx context.Context) (bool, error) {
	depth, err := r.refreshBacklog(ctx, true)
	if err != nil {
		if ctx.Err() != nil {
			return true, nil
		}
		return false, fmt.Errorf("settle: backlog: %w", err)
	}
	r.publishStats(0, 0)
	if !r.cfg.UntilEmpty {
		return false, nil
	}
	r.mu.Lock()
	left := len(r.left)
	r.mu.Unlock()
	return depth <= left, nil
}

func (r *runner) refreshBacklog(ctx context.Context, force bool) (int, error) {
	now := r.cfg.Now()
	if !force && now.Sub(r.backlogSeen) < backlogInterval {
		return r.stats.BacklogDepth, nil
	}
	depth, oldest, err := r.cfg.Consumer.Backlog(ctx)
	if err != nil {
		return 0, err
	}
	r.backlogSeen = now
	r.stats.BacklogDepth, r.stats.OldestAge = depth, 0
	if depth > 0 && !oldest.IsZero() {
		r.stats.OldestAge = now.Sub(oldest)
	}
	return depth, nil
}

func (r *runner) afterBatch(ctx context.Context, size, captured int, took time.Duration) {
	r.mu.Lock()
	r.rep.Batches++
	r.mu.Unlock()
	if r.cfg.OnStats == nil {
		return
	}
	if _, err := r.refreshBacklog(ctx, false); err != nil {
		r.cfg.Logger.Warn("settle: backlog", "err", err.Error())
	}
	rate := 0.0
	if took > 0 {
		rate = float64(captured) / took.Seconds()
	}
	r.publishStats(size, rate)
}

func (r *runner) publishStats(size int, rate float64) {
	if r.cfg.OnStats == nil {
		return
	}
	r.mu.Lock()
	r.stats.Captured, r.stats.Failed = int64(r.rep.Captured), int64(r.rep.Failed)
	r.mu.Unlock()
	r.stats.LastBatchSize, r.stats.CapturesPerSecond = size, rate
	r.cfg.OnStats(r.stats)
}

func (r *runner) finish(ctx context.Context) {
	depth, _, err := r.cfg.Consumer.Backlog(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.rep.BacklogDepth = depth
	}
	r.rep.Left = len(r.left)
	r.rep.close(r.cfg.Now())
}

// sleep waits d or until ctx ends; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
