// Package groupcommit batches writes from concurrent callers into one
// transaction: a writer takes every request waiting in a bounded queue (up
// to BatchSizeMax), optionally lingers up to FlushInterval for more, commits
// them together and then answers each caller. One fsync per request cannot
// reach thousands of writes per second; one per batch can.
//
// Under light load a batch holds one item and adds no latency (FlushInterval
// defaults to zero): items that arrive while a commit runs form the next
// batch, so batches grow with load by themselves. A FlushInterval is the
// longest a writer lingers for a fuller batch, and it lingers only where
// waiting is expected to pay (the adaptive linger, fill):
//   - after a batch with company: a caller alone (one connection, one sale
//     at a time) never waits for the timer;
//   - when at least one item is expected to arrive during a commit (the
//     measured arrival rate times the measured commit time): at moderate
//     load the next batch forms during the commit anyway, and waiting
//     only adds latency;
//   - while items keep coming: a gap of lingerGapFactor mean arrival gaps
//     with nothing new ends the wait, and a wait that runs to its end
//     after a long silence counts as one that ended on a gap;
//   - while lingering has paid of late: callers in a closed loop (a few
//     workers, each waiting for its answer before its next write) are all
//     in the batch once the stream stops, so a linger that ends on such a
//     gap rather than on its FlushInterval or a full batch counts against
//     lingering; once most recent ones did, the writer commits at once and
//     lingers again only to probe, one batch in lingerProbeEvery. An open
//     stream of arrivals (an event's checkout traffic, which does not wait
//     for the writer) fills lingers to their end and keeps them.
package groupcommit

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Config bounds a Committer.
type Config struct {
	// BatchSizeMax is the most items committed in one transaction. Default 256.
	BatchSizeMax int
	// QueueDepthMax is the most items waiting; Submit fails fast beyond it.
	// Default 4096.
	QueueDepthMax int
	// FlushInterval is the longest a writer waits for a partial batch to
	// fill; it waits only where waiting is expected to pay (the package
	// comment). Default 0: commit what is queued at once.
	FlushInterval time.Duration
	// Writers is the number of concurrent committers. SQLite has one writer;
	// PostgreSQL commits in parallel. Default 1.
	Writers int
	// OnBatch, if set, is called after every commit with the batch size and
	// the commit time (metrics). It must be cheap and safe for concurrent use.
	OnBatch func(size int, d time.Duration)
	// DelayTarget, if positive, is the queueing delay above which the
	// Committer sheds load (Overloaded): after each DelayInterval in which
	// every item a writer took had waited longer than DelayTarget (a
	// standing queue, not a burst: CoDel's signal) it reports a growing
	// share of calls overloaded (ShedFraction), and a shrinking share
	// after each window in which some item waited less; all of them while
	// a commit has run longer than DelayInterval with items waiting.
	// 0: never.
	DelayTarget time.Duration
	// DelayInterval is the window of DelayTarget. Default 10 x DelayTarget.
	DelayInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.BatchSizeMax <= 0 {
		c.BatchSizeMax = 256
	}
	if c.QueueDepthMax <= 0 {
		c.QueueDepthMax = 4096
	}
	if c.Writers <= 0 {
		c.Writers = 1
	}
	if c.DelayInterval <= 0 {
		c.DelayInterval = 10 * c.DelayTarget
	}
	return c
}

// ErrQueueFull is returned by Submit when QueueDepthMax items are waiting.
var ErrQueueFull = errors.New("groupcommit: queue full")

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("groupcommit: closed")

// Item is one caller's write in a batch. The commit function sets Err.
type Item[T any] struct {
	Ctx   context.Context
	Value T
	Err   error
	// Later, set by the commit function, says it left the item out of the
	// transaction it committed (a budget of time ran out before it): the
	// item is not answered, and leads the writer's next batch.
	Later bool
	done  chan struct{}
	// queued is when the item entered the queue (DelayTarget).
	queued time.Time
}

// CommitFunc commits a batch and sets each item's Err. It returns an error
// only if the whole batch failed; then every item without its own Err gets it.
// It may commit only some of the items and mark the others Later: they go
// into the writer's next batch, before anything queued. It must commit at
// least one: if it marks every item Later, each fails with ErrNoProgress.
type CommitFunc[T any] func(items []*Item[T]) error

// ErrNoProgress is an item's error when the commit function marked every
// item of its batch Later.
var ErrNoProgress = errors.New("groupcommit: the commit function committed no item of its batch")

// StallWindow is how far back Stats.StallMax looks, in StallWindow
// one-second buckets.
const StallWindow = 10 * time.Second

const stallBuckets = int(StallWindow / time.Second)

// Stats are running totals, for metrics.
type Stats struct {
	Batches, Items int64
	BatchSizeLast  int
	CommitTimeLast time.Duration
	// StallMax is the longest commit that ended within the last
	// StallWindow, or the commit in progress if it has run longer: how
	// long the writes of a batch, and every write queued behind it,
	// waited on one transaction. A writer stuck in a commit shows here
	// while it is stuck, not only once it ends.
	StallMax time.Duration
	// Committing is how many batches are being committed now: a writer
	// that has taken its batch from the queue and not yet answered it.
	Committing int
	// Lingered counts the batches that waited for more items (the
	// adaptive linger: Config.FlushInterval).
	Lingered int64
}

// Committer is a group-commit writer. Safe for concurrent use.
type Committer[T any] struct {
	cfg    Config
	commit CommitFunc[T]
	queue  chan *Item[T]

	// mu guards closed and every send on queue: a sender holds the read
	// lock, Close takes the write lock to close queue, so no send can reach
	// a closed queue.
	mu     sync.RWMutex
	closed bool
	// closing is closed when Close begins, before it takes the write lock:
	// a SubmitWait waiting for room (holding the read lock) gives up at
	// once, and a Submit arriving then fails without queueing for the lock.
	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	statsMu sync.Mutex
	stats   Stats
	// stall holds the longest commit that ended in each of the last
	// stallBuckets seconds (by Unix second); committing the start of each
	// writer's commit in progress (zero when idle). Guarded by statsMu.
	stall [stallBuckets]struct {
		sec int64
		max time.Duration
	}
	committing []time.Time
	// delay tracks the queueing delay for Overloaded: the start of the
	// current window and the least delay of an item taken in it (-1:
	// none yet). Guarded by statsMu. shed is the share of Overloaded
	// calls that answer true, in 1/shedScale; shedUntil (Unix
	// nanoseconds) is when it lapses if no window ends before.
	delay struct {
		start time.Time
		min   time.Duration
	}
	shed      atomic.Int64
	shedUntil atomic.Int64
	now       func() time.Time
	// arrivals counts the items ever submitted (the arrival rate of the
	// adaptive linger).
	arrivals atomic.Int64
	// OnBatch is Config.OnBatch.
	OnBatch func(size int, d time.Duration)
}

// New starts a Committer's writers.
func New[T any](cfg Config, commit CommitFunc[T]) *Committer[T] {
	cfg = cfg.withDefaults()
	c := &Committer[T]{cfg: cfg, commit: commit, queue: make(chan *Item[T], cfg.QueueDepthMax),
		closing: make(chan struct{}), OnBatch: cfg.OnBatch, committing: make([]time.Time, cfg.Writers), now: time.Now}
	for i := 0; i < cfg.Writers; i++ {
		c.wg.Add(1)
		go c.run(i)
	}
	return c
}

// Submit queues v and waits until its batch is committed, returning the
// item's error. It returns ErrQueueFull at once when the queue is full. Once
// queued, the write goes ahead even if ctx ends: Submit then still waits,
// because the caller must learn whether the write happened.
func (c *Committer[T]) Submit(ctx context.Context, v T) error {
	return c.submit(ctx, v, 0)
}

// SubmitWaitMax is the longest SubmitWait waits for room in a full queue.
const SubmitWaitMax = 30 * time.Second

// SubmitWait is Submit for a write that must not be refused lightly: one
// recording what already happened elsewhere (an operation the card network
// performed). When the queue is full it waits for room, up to
// SubmitWaitMax, whatever ctx says (unless ctx is from WithBoundedWait),
// and only then returns ErrQueueFull. If Close begins while it waits, it
// returns ErrClosed at once. The callers that wait are bounded by whoever
// calls (the API's in-flight limit), so the queue's bound still holds.
func (c *Committer[T]) SubmitWait(ctx context.Context, v T) error {
	return c.submit(ctx, v, SubmitWaitMax)
}

type boundedWaitKey struct{}

// WithBoundedWait returns a copy of ctx under which SubmitWait stops
// waiting for room in a full queue when ctx ends, and returns ErrQueueFull.
// It is for a write of no use after ctx's deadline that its caller can make
// again later (settlement: its record comes back and the provider replays
// its answer by key). Without it SubmitWait ignores ctx, so that the record
// of an operation the network performed is not given up because its client
// went away. Once queued, a write goes ahead either way.
func WithBoundedWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, boundedWaitKey{}, true)
}

func (c *Committer[T]) submit(ctx context.Context, v T, wait time.Duration) error {
	select {
	case <-c.closing:
		return ErrClosed // without waiting for the lock behind Close
	default:
	}
	it := &Item[T]{Ctx: ctx, Value: v, done: make(chan struct{})}
	c.arrivals.Add(1)
	if c.cfg.DelayTarget > 0 {
		it.queued = c.now()
	}
	if err := c.enqueue(ctx, it, wait); err != nil {
		return err
	}
	<-it.done
	return it.Err
}

// enqueue puts it in the queue, waiting up to wait for room. It holds the
// read lock throughout, so Close cannot close the queue under it; a wait
// ends as soon as Close begins, so Close's write lock, and every Submit
// that a pending write lock holds back, never wait on it.
func (c *Committer[T]) enqueue(ctx context.Context, it *Item[T], wait time.Duration) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	select {
	case c.queue <- it:
		return nil
	default:
	}
	if wait <= 0 {
		return ErrQueueFull
	}
	var ended <-chan struct{} // nil: ctx does not end the wait
	if ctx.Value(boundedWaitKey{}) != nil {
		ended = ctx.Done()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case c.queue <- it:
		return nil
	case <-c.closing:
		return ErrClosed
	case <-ended:
		return ErrQueueFull
	case <-t.C:
		return ErrQueueFull
	}
}

// The control law of Overloaded: the share shed, in 1/shedScale. A window
// whose every item waited longer than DelayTarget doubles it (at least
// shedStepUp), a window with an item under the target takes shedStepDown
// off. A burst within capacity (one window over) sheds a tenth of one
// window's writes, then less; an overload of a third over capacity
// (needing a quarter shed) is met within three windows.
const (
	shedScale    = 1000
	shedStepUp   = 100 // 10 %
	shedStepDown = 50  // 5 %
)

// observeDelay records the queueing delay d of an item taken at now, and
// at the end of each window of DelayInterval moves the share shed (see
// shedScale). Called with statsMu held.
func (c *Committer[T]) observeDelay(now time.Time, d time.Duration) {
	if c.delay.start.IsZero() {
		c.delay.start, c.delay.min = now, -1
	}
	if e := now.Sub(c.delay.start); e >= 2*c.cfg.DelayInterval {
		// An idle gap: the window before it says nothing of now.
		c.shed.Store(0)
		c.delay.start, c.delay.min = now, -1
	} else if e >= c.cfg.DelayInterval {
		// The item that closes a window is its last.
		if c.delay.min < 0 || d < c.delay.min {
			c.delay.min = d
		}
		s := c.shed.Load()
		if c.delay.min > c.cfg.DelayTarget {
			s = min(shedScale, max(2*s, shedStepUp))
		} else {
			s = max(0, s-shedStepDown)
		}
		c.shed.Store(s)
		c.shedUntil.Store(now.Add(2 * c.cfg.DelayInterval).UnixNano())
		c.delay.start, c.delay.min = now, -1
		return
	}
	if c.delay.min < 0 || d < c.delay.min {
		c.delay.min = d
	}
}

// Overloaded reports whether the caller should not add a write: true
// for a ShedFraction share of calls, chosen at random, while the queue
// stands (Config.DelayTarget), and for every call while a commit has run
// longer than DelayInterval with items waiting behind it. A caller that
// has not yet done work it cannot undo (the API, before a processor
// call) should refuse a new write then, rather than queue it: a standing
// queue only grows, and the memory and latency of everything in it.
// Always false without a DelayTarget. Cheap: two atomic loads while not
// overloaded and the queue is empty. Safe for concurrent use.
func (c *Committer[T]) Overloaded() bool {
	if c.cfg.DelayTarget <= 0 {
		return false
	}
	now := c.now()
	if s := c.shedNow(now); s > 0 && rand.Int64N(shedScale) < s { //nolint:gosec // G404: which calls are shed, a load share, not a secret
		return true
	}
	if len(c.queue) == 0 {
		return false
	}
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	for _, t := range c.committing {
		if !t.IsZero() && now.Sub(t) > c.cfg.DelayInterval {
			return true
		}
	}
	return false
}

// shedNow is the share shed at now, in 1/shedScale: 0 once no window has
// ended for two DelayIntervals (no item taken: the writer is idle).
func (c *Committer[T]) shedNow(now time.Time) int64 {
	s := c.shed.Load()
	if s > 0 && now.UnixNano() >= c.shedUntil.Load() {
		return 0
	}
	return s
}

// ShedFraction is the share of Overloaded calls answering true while no
// commit outlasts DelayInterval: 0 to 1.
func (c *Committer[T]) ShedFraction() float64 {
	if c.cfg.DelayTarget <= 0 {
		return 0
	}
	return float64(c.shedNow(c.now())) / shedScale
}

// QueueDepth returns the number of items waiting.
func (c *Committer[T]) QueueDepth() int { return len(c.queue) }

// Stats returns running totals.
func (c *Committer[T]) Stats() Stats {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	s := c.stats
	now := c.now()
	oldest := now.Unix() - int64(stallBuckets) + 1
	for _, b := range c.stall {
		if b.sec >= oldest {
			s.StallMax = max(s.StallMax, b.max)
		}
	}
	for _, t := range c.committing {
		if !t.IsZero() {
			s.StallMax = max(s.StallMax, now.Sub(t))
			s.Committing++
		}
	}
	return s
}

// Close stops accepting items, commits what is queued and waits for the
// writers to finish. Submits during Close, and SubmitWaits waiting for room
// when it begins, return ErrClosed promptly: none waits for another.
func (c *Committer[T]) Close() {
	c.closeOnce.Do(func() { close(c.closing) })
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Committer[T]) run(writer int) {
	defer c.wg.Done()
	batch := make([]*Item[T], 0, c.cfg.BatchSizeMax)
	later := make([]*Item[T], 0, c.cfg.BatchSizeMax) // the items the last commit left out
	last := 0                                        // the previous batch's size
	var l linger                                     // this writer's adaptive linger
	for {
		batch = append(batch[:0], later...)
		if len(batch) == 0 {
			first, ok := <-c.queue
			if !ok {
				return
			}
			batch = append(batch, first)
		}
		now := time.Now()
		l.observeArrivals(now, c.arrivals.Load())
		var wait time.Duration // the most this batch lingers; 0: none
		if last > 1 && c.cfg.FlushInterval > 0 {
			wait = l.decide(c.cfg.FlushInterval)
		}
		var ended lingerEnd
		batch, ended = c.fill(batch, wait, l.gap(c.cfg.FlushInterval))
		if wait > 0 {
			l.record(ended)
			c.statsMu.Lock()
			c.stats.Lingered++
			c.statsMu.Unlock()
		}
		start := time.Now()
		later = c.flush(writer, batch, later[:0])
		l.observeCommit(time.Since(start))
		last = len(batch)
	}
}

// The adaptive linger's constants (see the package comment).
const (
	// lingerGapFactor: a linger ends once nothing has arrived for this
	// many mean arrival gaps. In a stream of independent arrivals such a
	// gap comes once in e^6 (about 400) arrivals, so a linger of an
	// event's FlushInterval (8 ms, 40 arrivals at 5,000 a second) ends on
	// one about one time in ten.
	lingerGapFactor = 6
	// lingerProbeEvery: while lingering does not pay, one linger in this
	// many is tried anyway, to notice when it does again.
	lingerProbeEvery = 16
	// lingerRateWindow is the time constant of the arrival-rate and
	// commit-time averages: long enough to smooth a second's bursts,
	// short enough to follow a load that changes within a few seconds.
	lingerRateWindow = 250 * time.Millisecond
	// lingerSilenceGaps: a linger that ran to its end after a silence of
	// more than this many of its own mean arrival gaps counts as one that
	// ended on a gap (in a stream of independent arrivals, one in e^3,
	// 5 %, does).
	lingerSilenceGaps = 3
	// lingerScoreStep is how far one linger's outcome moves the score
	// (an exponential average over the last few lingers).
	lingerScoreStep = 0.25
)

// lingerEnd is how fill's wait for more items ended.
type lingerEnd uint8

const (
	lingerNone     lingerEnd = iota // no wait: nothing lingered
	lingerFull                      // the batch filled, or the queue closed
	lingerDeadline                  // the FlushInterval ran out with items still coming
	lingerGap                       // nothing arrived for lingerGapFactor mean gaps
)

// linger is one writer's adaptive-linger state: running averages of the
// arrival rate and of the commit time, and a score of how recent lingers
// ended. Used by its writer's goroutine alone.
type linger struct {
	seen     time.Time // when arrivals were last read
	count    int64     // Committer.arrivals then
	rate     float64   // arrivals a second, averaged over lingerRateWindow
	commit   float64   // a commit's seconds, averaged over recent commits
	closed   float64   // 0 to 1: the recent share of lingers that ended on a gap
	sinceTry int       // batches since the last linger, while closed ≥ 0.5
}

// observeArrivals folds the arrivals since the last call into the rate.
func (l *linger) observeArrivals(now time.Time, count int64) {
	if l.seen.IsZero() {
		l.seen, l.count = now, count
		return
	}
	dt := now.Sub(l.seen).Seconds()
	if dt <= 0 {
		return
	}
	inst := float64(count-l.count) / dt
	w := min(1, dt/lingerRateWindow.Seconds())
	l.rate += w * (inst - l.rate)
	l.seen, l.count = now, count
}

// observeCommit folds one commit's time into the average.
func (l *linger) observeCommit(d time.Duration) {
	const w = 0.1 // about the last ten commits
	if l.commit == 0 {
		l.commit = d.Seconds()
		return
	}
	l.commit += w * (d.Seconds() - l.commit)
}

// decide returns how long the next batch may linger, at most flush: 0
// when fewer than one arrival is expected during a commit (moderate load)
// or while recent lingers ended on a gap (a closed loop), but for one
// probe in lingerProbeEvery batches.
func (l *linger) decide(flush time.Duration) time.Duration {
	if l.rate*l.commit < 1 {
		return 0
	}
	if l.closed >= 0.5 {
		l.sinceTry++
		if l.sinceTry < lingerProbeEvery {
			return 0
		}
	}
	l.sinceTry = 0
	return flush
}

// gap is how long a linger waits for the next arrival: lingerGapFactor
// mean gaps, at most flush.
func (l *linger) gap(flush time.Duration) time.Duration {
	if l.rate <= 0 {
		return flush
	}
	return min(flush, time.Duration(lingerGapFactor/l.rate*float64(time.Second)))
}

// record scores how a linger ended: on a gap counts toward a closed loop,
// a full batch or the FlushInterval toward an open stream.
func (l *linger) record(e lingerEnd) {
	switch e {
	case lingerGap:
		l.closed += lingerScoreStep * (1 - l.closed)
	case lingerFull, lingerDeadline:
		l.closed -= lingerScoreStep * l.closed
	}
}

// fill adds waiting items to batch; with wait positive it lingers for
// more, up to wait in all and up to gap after the last arrival, and says
// how the linger ended.
func (c *Committer[T]) fill(batch []*Item[T], wait, gap time.Duration) ([]*Item[T], lingerEnd) {
	for len(batch) < c.cfg.BatchSizeMax {
		select {
		case it, ok := <-c.queue:
			if !ok {
				return batch, lingerFull
			}
			batch = append(batch, it)
			continue
		default:
		}
		break
	}
	if wait <= 0 {
		return batch, lingerNone
	}
	// The queue is drained: wait for what comes next.
	start := time.Now()
	deadline := start.Add(wait)
	last, came := start, 0 // the last arrival, and how many came
	timer := time.NewTimer(min(wait, gap))
	defer timer.Stop()
	for len(batch) < c.cfg.BatchSizeMax {
		select {
		case it, ok := <-c.queue:
			if !ok {
				return batch, lingerFull
			}
			batch = append(batch, it)
			last, came = time.Now(), came+1
			// Nothing for gap from now ends the wait.
			timer.Reset(min(deadline.Sub(last), gap))
		case now := <-timer.C:
			if now.Before(deadline) {
				return batch, lingerGap
			}
			// The whole wait ran out. Had the arrivals gone on to its end,
			// or stopped partway (everyone in a closed loop gathered)? A
			// silence at the end of over lingerSilenceGaps of this wait's
			// own mean gaps says they stopped.
			silence := now.Sub(last)
			if came == 0 || silence > lingerSilenceGaps*last.Sub(start)/time.Duration(came) {
				return batch, lingerGap
			}
			return batch, lingerDeadline
		}
	}
	return batch, lingerFull
}

// flush commits batch, answers the items committed and appends the items
// the commit function left out to later, which it returns.
func (c *Committer[T]) flush(writer int, batch []*Item[T], later []*Item[T]) []*Item[T] {
	c.statsMu.Lock()
	start := c.now()
	c.committing[writer] = start
	if c.cfg.DelayTarget > 0 {
		// The newest item of the batch waited least: its delay is the
		// batch's share of the window's minimum.
		c.observeDelay(start, start.Sub(batch[len(batch)-1].queued))
	}
	c.statsMu.Unlock()
	err := c.commit(batch)
	end := c.now()
	d := end.Sub(start)
	n := 0 // items committed
	for _, it := range batch {
		if !it.Later {
			n++
		}
	}
	if n == 0 && err == nil {
		err = ErrNoProgress
	}
	if n == 0 {
		n = len(batch) // all answered: an error (Later is not carried without progress)
	}
	// Counted before any item is answered, so that a caller whose Submit
	// has returned finds its batch in Stats.
	c.statsMu.Lock()
	c.stats.Batches++
	c.stats.Items += int64(n)
	c.stats.BatchSizeLast = n
	c.stats.CommitTimeLast = d
	c.committing[writer] = time.Time{}
	b := &c.stall[end.Unix()%int64(stallBuckets)]
	if b.sec != end.Unix() {
		b.sec, b.max = end.Unix(), 0
	}
	b.max = max(b.max, d)
	c.statsMu.Unlock()
	carry := n < len(batch)
	for _, it := range batch {
		if it.Later && carry {
			it.Later = false
			later = append(later, it)
			continue
		}
		it.Later = false
		if err != nil && it.Err == nil {
			it.Err = err
		}
		close(it.done)
	}
	if c.OnBatch != nil {
		c.OnBatch(n, d)
	}
	return later
}
