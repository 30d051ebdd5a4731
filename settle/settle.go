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
// store group-commits them. A store with the surgepay.PaymentsFinder
// capability loads a batch's payments in one statement.
//
// A record left for later (the network did not perform the capture, its
// outcome is unknown, its payment is not stored yet) is released to the
// stage with a backoff (stage.Releaser), so that it comes back after that
// delay, not after the stage's AckWait. With AckWait set, each batch is
// planned to end within it (see AckWaitMin), and records its results
// within it or leaves them for later; the next batch is fetched only once
// the current one has started its last capture, so that its own AckWait
// is not spent waiting.
package settle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/wait"
	"github.com/surgepay/surgepay/stage"
	"golang.org/x/time/rate"
)

// Defaults and limits. The batch size and workers are where BenchmarkSettle
// passed 20,000 captures/s on SQLite against the simulator at 0 ms (500
// and 64 gave 15-18k/s): a larger batch spreads each group commit and each
// fetch over more captures.
const (
	BatchSizeMaxDefault = 2000
	BatchSizeMaxLimit   = 10_000
	BatchWaitDefault    = 200 * time.Millisecond
	// PendingCheckWindowMax bounds Config.PendingCheckWindow.
	PendingCheckWindowMax = 31 * 24 * time.Hour
	// BatchIntervalMax bounds Config.BatchIntervalMin.
	BatchIntervalMax    = time.Minute
	RateMaxLimit        = 1_000_000 // captures per second
	WorkersDefault      = 128
	WorkersMax          = 4096
	RetryMaxDefault     = 3
	RetryMaxLimit       = 20
	RetryBackoffDefault = 100 * time.Millisecond
	CallTimeoutDefault  = 30 * time.Second // provider.timeout's default
	// AuthorizationLifetimeDefault is Stripe's: an uncaptured card
	// authorization is released after about 7 days.
	AuthorizationLifetimeDefault = 7 * 24 * time.Hour
	// OrphanGraceDefault, Min and Max bound Config.OrphanGrace. The grace
	// must exceed the longest a sale can take from its publish at the
	// stage to its commit (a JetStream record is published first): a
	// record acknowledged as an orphan whose payment commits later leaves
	// that payment's capture pending for good. The default covers the
	// longest publish-to-commit of a sale on PostgreSQL, about 90 s (up to
	// groupcommit.SubmitWaitMax, 30 s, waiting for room in a full write
	// queue, the commit's 30 s bound, and a retry of the Write alone),
	// with room; below it is safe only
	// when no API host is taking sales (after the event) or in tests.
	// Above the maximum, orphans would only be kept longer.
	OrphanGraceDefault = 2 * time.Minute
	OrphanGraceMin     = time.Second
	OrphanGraceMax     = 24 * time.Hour
	// ResultReserve is the time a batch keeps, after its last provider
	// call ends, to record the results and acknowledge the records: a
	// group commit of a batch takes milliseconds; this is room for a slow
	// store. Recording is cut off AckReserve before the batch's AckWait
	// ends (a store's full write queue would otherwise be waited out for
	// up to groupcommit.SubmitWaitMax, 30 s): the results not recorded by
	// then are left for later, unacknowledged, and the provider replays
	// each answer to the record's next delivery under the same key.
	ResultReserve = 5 * time.Second
	// AckReserve is the end of ResultReserve kept after recording: a batch
	// issues no result Write later than AckWait - AckReserve after its
	// fetch, so that one queued just before commits (milliseconds) and is
	// acknowledged before the records may be delivered again.
	AckReserve = time.Second
	// BatchWorkMin is the least time AckWait must leave a batch for
	// starting captures.
	BatchWorkMin = time.Second
	// AckWaitMax bounds Config.AckWait: a longer one only delays the
	// records of a crashed run.
	AckWaitMax = time.Hour
	// RedeliveryDelayMax caps the backoff of a record left for later, and
	// is the delay of records left for an operator (tampered, mismatch,
	// wrong_key, key_reused).
	RedeliveryDelayMax = time.Minute
	// LeftRedeliveriesMax is how many times an UntilEmpty run waits for a
	// record it left for later to come back; after that it counts the
	// record as left (Report.Left) and may end.
	LeftRedeliveriesMax = 5
	// conflictRetryMax bounds reloads of a payment whose version moved.
	conflictRetryMax = 5
	// lookupTriesMax bounds lookups of an unknown capture outcome, as the
	// engine does within a request.
	lookupTriesMax = 3
	// settlementStatementsMax bounds the statements a batch's results are
	// stored with at once (stores with surgepay.SettlementWriter), each
	// for at least settlementChunkMin results: one statement runs on one
	// database core.
	settlementStatementsMax = 4
	settlementChunkMin      = 250
	// stageErrorsMax ends Run after this many consecutive Fetch errors.
	stageErrorsMax = 10
	// backlogInterval spaces backlog queries (a COUNT on the embedded
	// stage, a scan of the backlog) while records flow, and more as they
	// grow slower: after a query that took d the next waits d divided by
	// backlogCostShare, at most backlogIntervalMax. A backlog of millions
	// of records takes a tenth of a second to count.
	backlogInterval    = time.Second
	backlogIntervalMax = time.Minute
	backlogCostShare   = 0.02
	// Audit trail.
	EventCapture       = "capture"
	EventCaptureFailed = "capture_failed"
	Actor              = "settle"
)

// Failure reasons in Report.Failures.
const (
	ReasonTampered   = "tampered"    // the record failed to open (modified or malformed); left for an operator, never captured
	ReasonWrongKey   = "wrong_key"   // sealed to another settlement key or format; left
	ReasonOrphan     = "orphan"      // no payment after the grace period; acknowledged
	ReasonOrphanWait = "orphan_wait" // no payment yet, within the grace period; left
	ReasonMismatch   = "mismatch"    // the instruction disagrees with the stored payment; left
	ReasonRetryLater = "retry_later" // the capture was not performed after the retries; left
	ReasonUnknown    = "unknown"     // the capture's outcome is still unknown; left
	ReasonKeyReused  = "key_reused"  // the provider refused the key's parameters; left
	ReasonStore      = "store_error" // reading or writing the store failed, or its result was not recorded within AckWait; left
	ReasonDeadline   = "deadline"    // the batch's time ran out before its capture started; released at once
	ReasonDeclined   = "declined:"   // + decline code: the payment moved to failed
	// ReasonPendingNoRecord counts payments, not records: a streamlined
	// payment whose capture is pending with no record at the stage (see
	// Config.PendingCheckWindow).
	ReasonPendingNoRecord = "pending_without_record"
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
	// BatchIntervalMin is the least time from the fetch of a batch that
	// was not full to the fetch of the next: while the backlog is shallow
	// (settle keeping up with a live event), captures gather into fewer,
	// larger batches. Each batch's results are write transactions; on the
	// embedded stage they are written to the database file the API is
	// writing, where the API's writer waits for each. 0 (the default):
	// fetch at once. At most BatchIntervalMax.
	BatchIntervalMin time.Duration
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
	// It is also the backoff of a record left for later: released to the
	// stage for RetryBackoff << (times this run left it), at most
	// RedeliveryDelayMax. Default 100ms.
	RetryBackoff time.Duration
	// OrphanGrace is how long a record whose payment is not stored is kept:
	// on JetStream the engine stages before it commits, and a payment that
	// never committed was never answered. OrphanGraceMin to
	// OrphanGraceMax; default 2m.
	OrphanGrace time.Duration
	// AuthorizationLifetime is how long a processor keeps an uncaptured
	// authorization (Stripe: about 7 days, the default): a staged capture's
	// deadline is its authorization's time plus this. Records come from the
	// stage oldest first (the embedded stage in ID order, JetStream's work
	// queue in order of arrival); those within ExpiryWarning of the
	// deadline, or past it, are logged and counted in the Report.
	AuthorizationLifetime time.Duration
	// ExpiryWarning is how close to the deadline a capture is reported as
	// near expiry. Default one day.
	ExpiryWarning time.Duration
	// PendingCheckWindow, if positive, makes an UntilEmpty run that drained
	// the stage look for streamlined payments created within this window
	// (and before OrphanGrace ago) whose capture is still pending although
	// no record of theirs is left at the stage: their staged record was lost
	// (a single JetStream server that lost acknowledged records on power
	// failure, a stream purged by hand). Each is logged by payment ID and
	// counted in Report.PendingWithoutRecord (reason
	// ReasonPendingNoRecord), for an operator. It reads every succeeded
	// payment in the window, ListLimitMax a query. At most
	// PendingCheckWindowMax.
	PendingCheckWindow time.Duration
	// AckWait is the stage's AckWait: how long a fetched record may stay
	// unacknowledged before the stage delivers it again. Settle plans each
	// batch to end within it: it starts no capture later than AckWait -
	// CallTimeout - ResultReserve after the fetch, stops retries then,
	// and releases the records not started (ReasonDeadline); it records
	// no result later than AckWait - AckReserve after the fetch, and
	// leaves a result not recorded by then for later (ReasonStore). It
	// must be AckWaitMin(CallTimeout) to AckWaitMax. 0: no plan (batches
	// are not timed).
	AckWait time.Duration
	// RateMax caps the captures started per second (0: no cap). On the
	// embedded default settle shares the machine and the database file
	// with the API; a cap leaves the API its share while settle runs
	// during an event. At most RateMaxLimit.
	RateMax float64
	// CallTimeout bounds one provider call: settle cancels it after that
	// (the provider's own timeout, provider.timeout, should be the same).
	// Default 30s.
	CallTimeout time.Duration
	// Analytics, if set, reports whether a merchant's analytics counters
	// are on: a capture settlement finds declined then carries its delta
	// (failed count and amount) in its result Write. A confirmed capture
	// moves no counter: it was counted when the sale was answered.
	Analytics func(merchantID string) bool
	// Logger logs per-record problems by record and payment ID only.
	// Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnStats, if set, is called after every batch (from Run's goroutine).
	OnStats func(Stats)
}

// Stats is live progress, for metrics: published after every batch and
// after every fetch that found nothing.
type Stats struct {
	BacklogDepth      int           // records at the stage, delivered or not (refreshed at most every second)
	OldestAge         time.Duration // age of the oldest record at the stage
	LastBatchSize     int           // records in the last batch; 0 after a fetch that found nothing
	Captured          int64         // captures recorded by this run
	Failed            int64         // declined captures recorded by this run (payments moved to failed)
	CapturesPerSecond float64       // over the last batch, fetch to acknowledgement; 0 after an empty fetch
	// Left is the records this run left at the stage and has not settled
	// since: for later, or for an operator (Report.Left at the end).
	Left int
	// Failures is Report.Failures so far: deliveries by reason. A copy,
	// the caller's to keep.
	Failures map[string]int
}

func (c *Config) defaults() error {
	if c.Store == nil || c.Provider == nil || c.Opener == nil || c.Consumer == nil {
		return errors.New("settle: Store, Provider, Opener and Consumer are required")
	}
	def := func(v *int, d, hi int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 1 || *v > hi {
			return fmt.Errorf("settle: %s %d must be 1 to %d", name, *v, hi)
		}
		return nil
	}
	if err := def(&c.BatchSizeMax, BatchSizeMaxDefault, BatchSizeMaxLimit, "BatchSizeMax"); err != nil {
		return err
	}
	if err := def(&c.Workers, WorkersDefault, WorkersMax, "Workers"); err != nil {
		return err
	}
	if c.PendingCheckWindow < 0 || c.PendingCheckWindow > PendingCheckWindowMax {
		return fmt.Errorf("settle: PendingCheckWindow %s must be 0 to %s", c.PendingCheckWindow, PendingCheckWindowMax)
	}
	if c.BatchIntervalMin < 0 || c.BatchIntervalMin > BatchIntervalMax {
		return fmt.Errorf("settle: BatchIntervalMin %s must be 0 to %s", c.BatchIntervalMin, BatchIntervalMax)
	}
	if c.RateMax < 0 || c.RateMax > RateMaxLimit {
		return fmt.Errorf("settle: RateMax %g must be 0 (no cap) to %d captures per second", c.RateMax, RateMaxLimit)
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
	}{{&c.BatchWait, BatchWaitDefault}, {&c.RetryBackoff, RetryBackoffDefault}, {&c.CallTimeout, CallTimeoutDefault}} {
		if *d.v <= 0 {
			*d.v = d.d
		}
	}
	if c.AuthorizationLifetime <= 0 {
		c.AuthorizationLifetime = AuthorizationLifetimeDefault
	}
	if c.ExpiryWarning <= 0 {
		c.ExpiryWarning = 24 * time.Hour
	}
	if c.OrphanGrace == 0 {
		c.OrphanGrace = OrphanGraceDefault
	}
	if err := CheckOrphanGrace(c.OrphanGrace); err != nil {
		return fmt.Errorf("settle: OrphanGrace %w", err)
	}
	if c.AckWait != 0 {
		if err := CheckAckWait(c.AckWait, c.CallTimeout); err != nil {
			return fmt.Errorf("settle: AckWait %w", err)
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

// AckWaitMin returns the shortest AckWait settle accepts with provider
// calls bounded by callTimeout (0: CallTimeoutDefault): a batch may take
// that long to end once it starts no more captures (one provider call
// started just before, then ResultReserve to record and acknowledge),
// plus BatchWorkMin to start captures at all.
func AckWaitMin(callTimeout time.Duration) time.Duration {
	if callTimeout <= 0 {
		callTimeout = CallTimeoutDefault
	}
	return BatchWorkMin + callTimeout + ResultReserve
}

// CheckAckWait returns an error, meant for operators and to follow the
// setting's name, if ackWait is not AckWaitMin(callTimeout) to
// AckWaitMax.
func CheckAckWait(ackWait, callTimeout time.Duration) error {
	if callTimeout <= 0 {
		callTimeout = CallTimeoutDefault
	}
	if least := AckWaitMin(callTimeout); ackWait < least {
		return fmt.Errorf("%s is too short: it must exceed the longest a batch can take, and a batch may still "+
			"wait on a provider call of up to %s (the provider timeout) started just before its time is up, then "+
			"take up to %s to record and acknowledge the results; with %s to start captures at all, it must be "+
			"at least %s (or lower the provider timeout)", ackWait, callTimeout, ResultReserve, BatchWorkMin, least)
	}
	if ackWait > AckWaitMax {
		return fmt.Errorf("%s must be at most %s: the records of a crashed settlement come back only after it",
			ackWait, AckWaitMax)
	}
	return nil
}

// CheckOrphanGrace returns an error, meant for operators and to follow the
// setting's name, if grace is not OrphanGraceMin to OrphanGraceMax.
func CheckOrphanGrace(grace time.Duration) error {
	if grace < OrphanGraceMin || grace > OrphanGraceMax {
		return fmt.Errorf("%s must be %s to %s: it must exceed the longest a sale can take from its publish at "+
			"the stage to its commit, or a payment still committing is dropped as an orphan and never captured",
			grace, OrphanGraceMin, OrphanGraceMax)
	}
	return nil
}

type runner struct {
	cfg      Config
	inWrite  stage.AcksInWrite // nil: acknowledge through the consumer
	releaser stage.Releaser    // nil: records left for later come back after AckWait
	sem      chan struct{}
	limiter  *rate.Limiter // nil: no RateMax

	mu   sync.Mutex // guards rep, left, stats and the backlog's fields below
	rep  *Report
	left map[string]*leftRecord // records left for later and not acknowledged since

	nearExpiry, pastExpiry atomic.Int64

	stats           Stats
	backlogSeen     time.Time
	backlogWait     time.Duration  // from backlogSeen to the next unforced query
	backlogCounting bool           // an unforced query runs in the background
	backlogDone     sync.WaitGroup // the background query; Run waits for it
}

// Run settles staged captures until ctx ends or, with UntilEmpty, the
// stage is drained. It returns the report of what it did; its error is a
// configuration error or a stage that keeps failing. A batch in progress
// when ctx ends is finished (provider calls are not cancelled) but not
// retried; the batch fetched ahead of it is handed back to the stage.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, sem: make(chan struct{}, cfg.Workers), left: map[string]*leftRecord{},
		rep: newReport(cfg.Now())}
	r.inWrite, _ = cfg.Consumer.(stage.AcksInWrite)
	r.releaser, _ = cfg.Consumer.(stage.Releaser)
	if cfg.RateMax > 0 {
		r.limiter = rate.NewLimiter(rate.Limit(cfg.RateMax), 1)
	}
	err := r.loop(ctx)
	if err == nil && ctx.Err() == nil && cfg.UntilEmpty && cfg.PendingCheckWindow > 0 {
		err = r.checkPending(ctx)
	}
	r.backlogDone.Wait()
	r.finish(context.WithoutCancel(ctx))
	return r.rep, err
}

func (r *runner) loop(ctx context.Context) error {
	stageErrors := 0
	next := r.prefetch(ctx, nil, time.Time{})
	for {
		b := <-next
		switch {
		case ctx.Err() != nil:
			r.releaseNow(context.WithoutCancel(ctx), b.recs)
			return nil
		case b.err != nil:
			// Records a failing fetch returned anyway go back at once.
			r.releaseNow(context.WithoutCancel(ctx), b.recs)
			if stageErrors++; stageErrors >= stageErrorsMax {
				return fmt.Errorf("settle: fetch: %d errors in a row, last: %w", stageErrors, b.err)
			}
			r.cfg.Logger.Warn("settle: fetch", "err", b.err.Error())
			_ = wait.Sleep(ctx, r.cfg.RetryBackoff<<min(stageErrors, 6))
			next = r.prefetch(ctx, nil, time.Time{})
			continue
		}
		stageErrors = 0
		if len(b.recs) == 0 {
			done, err := r.idle(ctx)
			if done || err != nil {
				return err
			}
			next = r.prefetch(ctx, nil, time.Time{})
			continue
		}
		// The next batch is fetched, opened and loaded during this one's
		// tail, once every record of this one has started its capture (or
		// needs none). Not sooner: the next batch's AckWait runs from its
		// fetch, and with a slow provider or RateMax, a batch fetched when
		// this one began would find its time spent when its turn came, and
		// hand its records back as deadline.
		tail := make(chan struct{})
		var notBefore time.Time // a full batch: the backlog is deep, fetch at once
		if len(b.recs) < r.cfg.BatchSizeMax {
			notBefore = b.fetched.Add(r.cfg.BatchIntervalMin)
		}
		next = r.prefetch(ctx, tail, notBefore)
		captured := r.batch(ctx, b, tail)
		r.afterBatch(ctx, len(b.recs), captured, r.cfg.Now().Sub(b.start))
	}
}

// prepared is a fetched batch, opened, with its payments loaded when the
// store can load them at once.
type prepared struct {
	start    time.Time // Config.Now before the fetch
	fetched  time.Time // before the fetch: the stage's AckWait of recs starts after it
	recs     []*surgepay.StagedRecord
	err      error
	ds       []decision
	payments map[surgepay.PaymentKey]*surgepay.Payment
}

// prefetch prepares the next batch in the background, once after is
// closed (nil: at once) and not before notBefore (Config.BatchIntervalMin):
// its fetch, opening and load overlap the end of the batch before it.
// Once returned, the batch must be settled or released.
func (r *runner) prefetch(ctx context.Context, after <-chan struct{}, notBefore time.Time) <-chan *prepared {
	c := make(chan *prepared, 1)
	go func() {
		if after != nil {
			<-after
		}
		if !notBefore.IsZero() {
			_ = wait.Sleep(ctx, time.Until(notBefore))
		}
		if after != nil && ctx.Err() != nil { // the run is ending: fetch nothing only to hand it back
			c <- &prepared{err: ctx.Err()}
			return
		}
		b := &prepared{start: r.cfg.Now(), fetched: time.Now()}
		b.recs, b.err = r.cfg.Consumer.Fetch(ctx, r.cfg.BatchSizeMax, r.cfg.BatchWait)
		if b.err == nil && len(b.recs) > 0 {
			b.ds = r.open(b.recs)
			b.payments = r.preload(context.WithoutCancel(ctx), b.ds)
		}
		c <- b
	}()
	return c
}

// releaseNow hands recs, fetched and not settled, back to the stage at
// once (on shutdown), so that another processor need not wait out AckWait.
func (r *runner) releaseNow(ctx context.Context, recs []*surgepay.StagedRecord) {
	if len(recs) == 0 || r.releaser == nil {
		return
	}
	if err := r.releaser.Release(ctx, recs, 0); err != nil {
		r.cfg.Logger.Warn("settle: release records not settled", "records", len(recs), "err", err.Error())
	}
}

// idle refreshes the backlog after an empty fetch and reports whether an
// UntilEmpty run is done: nothing waits but what this run left for later
// and does not wait for (see LeftRedeliveriesMax).
func (r *runner) idle(ctx context.Context) (bool, error) {
	depth, err := r.refreshBacklog(ctx)
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
	left := 0
	for _, l := range r.left {
		if !l.waiting {
			left++
		}
	}
	r.mu.Unlock()
	return depth <= left, nil
}

// refreshBacklog queries the backlog now and returns its depth.
func (r *runner) refreshBacklog(ctx context.Context) (int, error) {
	start := r.cfg.Now()
	depth, oldest, err := r.cfg.Consumer.Backlog(ctx)
	if err != nil {
		return 0, err
	}
	end := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backlogSeen = end
	r.backlogWait = min(max(time.Duration(float64(end.Sub(start))/backlogCostShare), backlogInterval), backlogIntervalMax)
	r.stats.BacklogDepth, r.stats.OldestAge = depth, 0
	if depth > 0 && !oldest.IsZero() {
		r.stats.OldestAge = start.Sub(oldest)
	}
	return depth, nil
}

// refreshBacklogBehind starts a query of the backlog in the background if
// one is due and none runs: the figures are for OnStats, and the embedded
// stage paces its count of millions of records over seconds, which the
// batches do not wait for. The next OnStats reports what it found.
func (r *runner) refreshBacklogBehind(ctx context.Context) {
	r.mu.Lock()
	due := !r.backlogCounting && r.cfg.Now().Sub(r.backlogSeen) >= r.backlogWait
	if due {
		r.backlogCounting = true
		r.backlogDone.Add(1)
	}
	r.mu.Unlock()
	if !due {
		return
	}
	go func() {
		defer r.backlogDone.Done()
		if _, err := r.refreshBacklog(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("settle: backlog", "err", err.Error())
		}
		r.mu.Lock()
		r.backlogCounting = false
		r.mu.Unlock()
	}()
}

func (r *runner) afterBatch(ctx context.Context, size, captured int, took time.Duration) {
	r.mu.Lock()
	r.rep.Batches++
	r.mu.Unlock()
	if r.cfg.OnStats == nil {
		return
	}
	r.refreshBacklogBehind(ctx)
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
	r.stats.Left, r.stats.Failures = len(r.left), maps.Clone(r.rep.Failures)
	r.stats.LastBatchSize, r.stats.CapturesPerSecond = size, rate
	s := r.stats
	r.mu.Unlock()
	r.cfg.OnStats(s)
}

func (r *runner) finish(ctx context.Context) {
	depth, _, err := r.cfg.Consumer.Backlog(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.rep.BacklogDepth = depth
	}
	r.rep.Left = len(r.left)
	r.rep.NearExpiry, r.rep.PastExpiry = int(r.nearExpiry.Load()), int(r.pastExpiry.Load())
	r.rep.close(r.cfg.Now())
}
