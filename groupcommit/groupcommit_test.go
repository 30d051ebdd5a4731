package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBatchesConcurrentCallers(t *testing.T) {
	var committed atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	c := New(Config{BatchSizeMax: 64}, func(items []*Item[int]) error {
		once.Do(func() { close(entered); <-release }) // hold the first commit so the rest queue up
		committed.Add(int64(len(items)))
		return nil
	})
	const n = 100
	var wg sync.WaitGroup
	submit := func() { defer wg.Done(); _ = c.Submit(context.Background(), 1) }
	wg.Add(1)
	go submit()
	<-entered
	for i := 1; i < n; i++ {
		wg.Add(1)
		go submit()
	}
	for c.QueueDepth() < n-1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	c.Close()
	st := c.Stats()
	if committed.Load() != n || st.Items != n {
		t.Fatalf("committed %d items (stats %d), want %d", committed.Load(), st.Items, n)
	}
	// 1 held item, then 99 queued items in batches of at most 64: 3 batches.
	if st.Batches != 3 {
		t.Fatalf("got %d batches, want 3", st.Batches)
	}
}

func TestItemErrorsAreSeparate(t *testing.T) {
	c := New(Config{}, func(items []*Item[int]) error {
		for _, it := range items {
			if it.Value%2 == 1 {
				it.Err = errors.New("odd")
			}
		}
		return nil
	})
	defer c.Close()
	if err := c.Submit(context.Background(), 2); err != nil {
		t.Fatalf("even: got %v, want nil", err)
	}
	if err := c.Submit(context.Background(), 3); err == nil {
		t.Fatal("odd: got nil, want error")
	}
}

func TestBatchErrorReachesEveryItem(t *testing.T) {
	boom := errors.New("disk full")
	c := New(Config{}, func(items []*Item[int]) error { return boom })
	defer c.Close()
	if err := c.Submit(context.Background(), 1); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
}

func TestQueueFullIsBackpressure(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	c := New(Config{QueueDepthMax: 2, BatchSizeMax: 1}, func(items []*Item[int]) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	})
	var wg sync.WaitGroup
	submit := func(v int) { defer wg.Done(); _ = c.Submit(context.Background(), v) }
	wg.Add(1)
	go submit(0)
	<-entered                 // the writer holds item 0 in its commit
	for i := 1; i <= 2; i++ { // two more fill the queue
		wg.Add(1)
		go submit(i)
	}
	for c.QueueDepth() < 2 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Submit(context.Background(), 9); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	// SubmitWait waits for room instead, even with its context cancelled,
	// and is committed once the writer moves on.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	waited := make(chan error, 1)
	go func() { waited <- c.SubmitWait(cancelled, 10) }()
	select {
	case err := <-waited:
		t.Fatalf("SubmitWait on a full queue returned %v before there was room", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("SubmitWait: %v", err)
	}
	wg.Wait()
	c.Close()
	if err := c.Submit(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: got %v, want ErrClosed", err)
	}
}

// fullQueue returns a committer with a queue of one, whose writer holds
// item 0 in a commit until release is closed and whose queue holds item 1;
// both Submits run in the background and report on results. committed
// counts each value's commits.
func fullQueue(t *testing.T) (c *Committer[int], release chan struct{}, results chan error, committed *sync.Map) {
	t.Helper()
	entered := make(chan struct{}, 1)
	release = make(chan struct{})
	committed = &sync.Map{}
	c = New(Config{QueueDepthMax: 1, BatchSizeMax: 1}, func(items []*Item[int]) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		for _, it := range items {
			n, _ := committed.LoadOrStore(it.Value, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
		return nil
	})
	results = make(chan error, 2)
	go func() { results <- c.Submit(context.Background(), 0) }()
	<-entered
	go func() { results <- c.Submit(context.Background(), 1) }()
	for c.QueueDepth() < 1 {
		time.Sleep(time.Millisecond)
	}
	return c, release, results, committed
}

// waitReaderOnly waits until a caller holds the committer's read lock and
// nobody else does: first for the lock to be free (the Submits of
// fullQueue are out of it), then, once start has run, for it to be taken.
// A SubmitWait holds the read lock while it waits for room.
func waitReaderOnly(c *Committer[int], start func()) {
	for !c.mu.TryLock() {
		time.Sleep(time.Millisecond)
	}
	c.mu.Unlock()
	start()
	for c.mu.TryLock() {
		c.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// TestCloseDoesNotHoldSubmitsBehindSubmitWait: a SubmitWait waiting for
// room in a full queue when Close begins returns ErrClosed at once, so
// that Close's write lock, pending meanwhile, does not hold every plain
// Submit back for up to SubmitWaitMax. What was queued is committed once;
// what was refused, never.
func TestCloseDoesNotHoldSubmitsBehindSubmitWait(t *testing.T) {
	c, release, results, committed := fullQueue(t)
	waited := make(chan error, 1)
	waitReaderOnly(c, func() { go func() { waited <- c.SubmitWait(context.Background(), 2) }() })
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()

	// Plain Submits during Close: refused as full until Close has begun,
	// then as closed; none may wait for the SubmitWait's timeout.
	refused := 0
	for v := 3; ; v++ {
		start := time.Now()
		err := c.Submit(context.Background(), v)
		if took := time.Since(start); took > SubmitWaitMax/2 {
			t.Fatalf("Submit during Close took %v, the order of SubmitWaitMax (%v): it waited behind the SubmitWait", took, SubmitWaitMax)
		}
		if errors.Is(err, ErrClosed) {
			break
		}
		if !errors.Is(err, ErrQueueFull) {
			t.Fatalf("Submit during Close: got %v, want ErrQueueFull or ErrClosed", err)
		}
		refused++
		time.Sleep(time.Millisecond)
	}
	if err := <-waited; !errors.Is(err, ErrClosed) {
		t.Errorf("SubmitWait during Close: got %v, want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned before the items queued were committed")
	default:
	}
	close(release)
	<-closed
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("item queued before Close: got %v, want nil", err)
		}
	}
	for v := range 3 + refused + 1 {
		want := int64(0)
		if v <= 1 {
			want = 1
		}
		got := int64(0)
		if n, ok := committed.Load(v); ok {
			got = n.(*atomic.Int64).Load()
		}
		if got != want {
			t.Errorf("item %d committed %d times, want %d", v, got, want)
		}
	}
}

// TestCloseRacingSubmits: Submits and SubmitWaits racing Close on a small
// queue never send on the closed queue (that would panic), and every item
// is committed exactly once if its Submit returned nil, never otherwise.
func TestCloseRacingSubmits(t *testing.T) {
	const callers, perCaller = 16, 200
	var counts [callers * perCaller]atomic.Int64
	var total atomic.Int64
	c := New(Config{QueueDepthMax: 4, BatchSizeMax: 3}, func(items []*Item[int]) error {
		for _, it := range items {
			counts[it.Value].Add(1)
		}
		total.Add(int64(len(items)))
		time.Sleep(50 * time.Microsecond) // slower than the callers: the queue stays full
		return nil
	})
	var results [callers * perCaller]atomic.Pointer[error]
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range perCaller {
				v := g*perCaller + i
				var err error
				if v%2 == 0 {
					err = c.SubmitWait(context.Background(), v)
				} else {
					err = c.Submit(context.Background(), v)
				}
				results[v].Store(&err)
				if errors.Is(err, ErrClosed) {
					return
				}
			}
		})
	}
	for total.Load() < callers*perCaller/4 {
		runtime.Gosched()
	}
	c.Close()
	wg.Wait()
	accepted := 0
	for v := range results {
		p := results[v].Load()
		if p == nil {
			continue // never submitted: its caller saw ErrClosed first
		}
		switch err, n := *p, counts[v].Load(); {
		case err == nil && n != 1:
			t.Errorf("item %d: Submit returned nil, committed %d times, want 1", v, n)
		case err != nil && n != 0:
			t.Errorf("item %d: Submit returned %v, committed %d times, want 0", v, err, n)
		case err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrQueueFull):
			t.Errorf("item %d: got %v, want nil, ErrQueueFull or ErrClosed", v, err)
		case err == nil:
			accepted++
		}
	}
	if accepted == 0 || int64(accepted) != total.Load() {
		t.Errorf("%d items accepted, %d committed; want the same, more than 0", accepted, total.Load())
	}
}

// TestSubmitWaitBoundedByContext: under WithBoundedWait, a SubmitWait
// waiting for room returns ErrQueueFull when its context ends, and its
// item is never committed; a plain context does not end the wait (see
// TestQueueFullIsBackpressure).
func TestSubmitWaitBoundedByContext(t *testing.T) {
	c, release, results, committed := fullQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	waitReaderOnly(c, func() { go func() { waited <- c.SubmitWait(WithBoundedWait(ctx), 2) }() })
	cancel()
	if err := <-waited; !errors.Is(err, ErrQueueFull) {
		t.Errorf("SubmitWait whose bounded context ended: got %v, want ErrQueueFull", err)
	}
	close(release)
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("item queued before: got %v, want nil", err)
		}
	}
	// With room, an ended bounded context does not refuse the item: the
	// wait is bounded, not the write.
	if err := c.SubmitWait(WithBoundedWait(ctx), 3); err != nil {
		t.Errorf("SubmitWait with room: got %v, want nil", err)
	}
	c.Close()
	if _, ok := committed.Load(2); ok {
		t.Error("the item SubmitWait gave up on was committed")
	}
	if _, ok := committed.Load(3); !ok {
		t.Error("the item SubmitWait queued was not committed")
	}
}

// StallMax shows a commit in progress while it runs, keeps the longest
// commit that ended for StallWindow, then forgets it; Committing counts the
// commit only while it runs.
func TestStallMax(t *testing.T) {
	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	entered, release := make(chan struct{}), make(chan struct{})
	c := New(Config{}, func(items []*Item[int]) error {
		if items[0].Value == 1 {
			advance(3 * time.Second)
			close(entered)
			<-release
		}
		return nil
	})
	c.now = now
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Submit(context.Background(), 1) }()
	<-entered
	if got := c.Stats().StallMax; got != 3*time.Second {
		t.Errorf("StallMax during a 3 s commit = %v, want 3s", got)
	}
	if got := c.Stats().Committing; got != 1 {
		t.Errorf("Committing during a commit = %d, want 1", got)
	}
	advance(time.Second)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.Submit(context.Background(), 2); err != nil { // a fast one after
		t.Fatal(err)
	}
	if got := c.Stats().StallMax; got != 4*time.Second {
		t.Errorf("StallMax after the 4 s commit ended = %v, want 4s", got)
	}
	if got := c.Stats().Committing; got != 0 {
		t.Errorf("Committing with no commit running = %d, want 0", got)
	}
	advance(StallWindow)
	if got := c.Stats().StallMax; got != 0 {
		t.Errorf("StallMax %v after the window = %v, want 0", StallWindow, got)
	}
}

// TestLingerOnlyWithCompany: a caller alone never waits for FlushInterval
// (here an hour: the test would hang), however slow its commits.
func TestLingerOnlyWithCompany(t *testing.T) {
	c := New(Config{BatchSizeMax: 64, FlushInterval: time.Hour}, func(items []*Item[int]) error {
		time.Sleep(time.Millisecond)
		return nil
	})
	defer c.Close()
	for i := range 50 {
		if err := c.Submit(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Lingered != 0 || st.Batches != 50 {
		t.Fatalf("a caller alone: %d batches, %d lingered; want 50, none", st.Batches, st.Lingered)
	}
}

// openStream submits an item every gap from its own goroutine, not
// waiting for the answers (an open stream of arrivals, as an event's
// checkout traffic is), until n are answered.
func openStream(t *testing.T, c *Committer[int], n int, gap time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		wg.Go(func() {
			if err := c.Submit(context.Background(), i); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// closedLoop runs workers callers, each submitting its next item once its
// last is answered (a few checkout workers), rounds items each.
func closedLoop(t *testing.T, c *Committer[int], workers, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				if err := c.Submit(context.Background(), w*rounds+i); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// slowCommit is a commit function taking d a batch.
func slowCommit(d time.Duration) CommitFunc[int] {
	return func(items []*Item[int]) error {
		time.Sleep(d)
		return nil
	}
}

// TestLingerFillsAnOpenStream (issue 35 item 2): under an open stream of
// arrivals faster than commits, the writer lingers for fuller batches,
// up to FlushInterval: its batches hold several times what commits alone
// gather, in the same run.
func TestLingerFillsAnOpenStream(t *testing.T) {
	const n, gap, commit = 600, 200 * time.Microsecond, 2 * time.Millisecond
	mean := func(flush time.Duration) (float64, Stats) {
		c := New(Config{BatchSizeMax: 256, FlushInterval: flush}, slowCommit(commit))
		openStream(t, c, n, gap)
		st := c.Stats()
		c.Close()
		return float64(st.Items) / float64(st.Batches), st
	}
	none, _ := mean(0)
	adaptive, st := mean(30 * time.Millisecond)
	t.Logf("items a batch: %.1f without a linger, %.1f with the adaptive one (%d of %d batches lingered)",
		none, adaptive, st.Lingered, st.Batches)
	if st.Lingered == 0 || adaptive < 2*none {
		t.Fatalf("an open stream: %.1f items a batch lingering (%d batches lingered), %.1f without; want at least twice",
			adaptive, st.Lingered, none)
	}
}

// TestLingerStopsInAClosedLoop (issue 35 item 2): callers in a closed loop
// are all in the batch once their stream stops; lingering for more only
// delays them. The writer learns it from how its lingers end and lingers
// again only to probe: with FlushInterval an hour (the test would hang if
// a linger waited it out) few batches linger.
func TestLingerStopsInAClosedLoop(t *testing.T) {
	c := New(Config{BatchSizeMax: 256, FlushInterval: time.Hour}, slowCommit(500*time.Microsecond))
	defer c.Close()
	closedLoop(t, c, 8, 300)
	st := c.Stats()
	t.Logf("%d batches, %d lingered", st.Batches, st.Lingered)
	if st.Lingered > st.Batches/lingerProbeEvery+8 {
		t.Fatalf("a closed loop of 8: %d of %d batches lingered, want at most one in %d and a few to learn",
			st.Lingered, st.Batches, lingerProbeEvery)
	}
}

// TestLingerStopsInASlowClosedLoop: the same where commits are slow, so
// that a gap of lingerGapFactor mean arrival gaps is longer than the
// FlushInterval and every linger runs to its end: the silence at its end
// (the loop's workers all gathered early in it) says the loop is closed.
func TestLingerStopsInASlowClosedLoop(t *testing.T) {
	c := New(Config{BatchSizeMax: 256, FlushInterval: 3 * time.Millisecond}, slowCommit(4*time.Millisecond))
	defer c.Close()
	closedLoop(t, c, 8, 100)
	st := c.Stats()
	t.Logf("%d batches, %d lingered", st.Batches, st.Lingered)
	if st.Lingered > st.Batches/lingerProbeEvery+8 {
		t.Fatalf("a slow closed loop of 8: %d of %d batches lingered, want at most one in %d and a few to learn",
			st.Lingered, st.Batches, lingerProbeEvery)
	}
}

// TestNoLingerAtModerateLoad (issue 35 item 2): when fewer than one item
// arrives during a commit, the next batch forms while a commit runs and a
// linger only adds latency: pairs of callers arriving every few
// milliseconds, each pair with company, are never held for the
// FlushInterval (an hour).
func TestNoLingerAtModerateLoad(t *testing.T) {
	c := New(Config{BatchSizeMax: 256, FlushInterval: time.Hour}, slowCommit(200*time.Microsecond))
	defer c.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range 100 {
		<-tick.C
		closedLoop(t, c, 2, 1)
	}
	if st := c.Stats(); st.Lingered != 0 {
		t.Fatalf("moderate load: %d of %d batches lingered, want none", st.Lingered, st.Batches)
	}
}

// TestOverloaded: with a DelayTarget, the committer is overloaded while a
// commit has run longer than DelayInterval with items waiting, and for a
// DelayInterval after a whole window in which every item taken had waited
// longer than DelayTarget; a window with one item taken at once is not;
// without a DelayTarget never.
func TestOverloaded(t *testing.T) {
	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	entered := make(chan int)
	gates := map[int]chan struct{}{1: make(chan struct{}), 3: make(chan struct{}), 4: make(chan struct{})}
	c := New(Config{DelayTarget: 50 * time.Millisecond}, func(items []*Item[int]) error {
		for _, it := range items {
			if g, ok := gates[it.Value]; ok {
				entered <- it.Value
				<-g
			}
		}
		return nil
	})
	c.now = now
	defer c.Close()
	if c.cfg.DelayInterval != 500*time.Millisecond {
		t.Fatalf("DelayInterval %v, want 10 x DelayTarget", c.cfg.DelayInterval)
	}
	done := make(chan error, 8)
	submit := func(v int) {
		go func() { done <- c.Submit(context.Background(), v) }()
		for c.QueueDepth() == 0 && len(entered) == 0 {
			select {
			case got := <-entered: // taken at once into a gated commit
				if got != v {
					t.Fatalf("entered %d, want %d", got, v)
				}
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	check := func(when string, want bool) {
		t.Helper()
		if got := c.Overloaded(); got != want {
			t.Errorf("%s: Overloaded %v, want %v", when, got, want)
		}
	}
	wait := func(n int) {
		t.Helper()
		for range n {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	check("idle", false)
	submit(1) // taken at once (delay 0), its commit held
	advance(600 * time.Millisecond)
	submit(2) // waits behind a commit of 600 ms > 500 ms
	check("a 600 ms commit with an item waiting", true)
	close(gates[1])
	wait(2) // 2 taken at 600 ms, delay 0: the window had a delay of 0
	check("after the long commit, queue empty", false)

	submit(3) // taken at once at 600 ms, its commit held
	advance(550 * time.Millisecond)
	submit(4) // queued at 1150 ms
	advance(100 * time.Millisecond)
	close(gates[3])
	if got := <-entered; got != 4 { // 4 taken at 1250 ms after 100 ms: a new window
		t.Fatalf("entered %d, want 4", got)
	}
	wait(1)
	check("one item over the target, the window not yet whole", false)
	advance(550 * time.Millisecond)
	submit(5) // queued at 1800 ms
	advance(100 * time.Millisecond)
	close(gates[4])
	wait(2) // 5 taken at 1900 ms after 100 ms: the window [1250, 1900) all over 50 ms
	if f := c.ShedFraction(); f != 0.1 {
		t.Fatalf("a whole window with every item over the target: ShedFraction %v, want 0.1", f)
	}
	if n := overloadedOf(c, 10_000); n < 800 || n > 1200 {
		t.Errorf("a whole window with every item over the target: Overloaded %d times in 10,000, want about 1,000", n)
	}
	advance(999 * time.Millisecond)
	if f := c.ShedFraction(); f != 0.1 {
		t.Errorf("0.999 s later: ShedFraction %v, want 0.1 until two DelayIntervals pass without a window", f)
	}
	advance(time.Millisecond)
	check("two DelayIntervals later, no item taken", false)

	off := New(Config{}, func([]*Item[int]) error { return nil })
	defer off.Close()
	if off.Overloaded() {
		t.Error("Overloaded without a DelayTarget")
	}
}

// overloadedOf counts the Overloaded answers of n calls.
func overloadedOf(c *Committer[int], n int) int {
	k := 0
	for range n {
		if c.Overloaded() {
			k++
		}
	}
	return k
}

// TestShedLaw: each window whose every item waited over DelayTarget
// doubles the share shed (at least 10 %, at most all), each window with
// an item under it takes 5 % off, an idle gap clears it.
func TestShedLaw(t *testing.T) {
	c := New(Config{DelayTarget: 50 * time.Millisecond}, func([]*Item[int]) error { return nil })
	defer c.Close()
	clock := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return clock }
	observe := func(delay time.Duration) {
		c.statsMu.Lock()
		c.observeDelay(clock, delay)
		c.statsMu.Unlock()
	}
	observe(0)                            // opens the first window
	window := func(delay time.Duration) { // an item within the window, one that closes it
		clock = clock.Add(100 * time.Millisecond)
		observe(delay)
		clock = clock.Add(400 * time.Millisecond)
		observe(delay)
	}
	want := func(what string, f float64) {
		t.Helper()
		if got := c.ShedFraction(); got != f {
			t.Errorf("%s: ShedFraction %v, want %v", what, got, f)
		}
	}
	window(0)
	want("a window under the target", 0)
	for _, f := range []float64{0.1, 0.2, 0.4, 0.8, 1, 1} {
		window(80 * time.Millisecond)
		want("another window over the target", f)
	}
	if n := overloadedOf(c, 1000); n != 1000 {
		t.Errorf("all shed: Overloaded %d times in 1,000", n)
	}
	window(10 * time.Millisecond)
	want("a window under the target", 0.95)
	clock = clock.Add(2 * time.Second) // idle: no item taken
	observe(0)
	want("after an idle gap", 0)
}

// A commit function that takes at most three items of a batch: the rest are
// answered only once committed, lead the next batch in their order, and
// are all committed even when Close has closed the queue meanwhile.
func TestLaterLeadsTheNextBatch(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var (
		mu        sync.Mutex
		batches   [][]int
		committed = map[int]bool{}
	)
	c := New(Config{BatchSizeMax: 8}, func(items []*Item[int]) error {
		if items[0].Value == 0 {
			close(entered)
			<-release
		}
		mu.Lock()
		defer mu.Unlock()
		var vs []int
		for i, it := range items {
			vs = append(vs, it.Value)
			if i >= 3 {
				it.Later = true
				continue
			}
			if committed[it.Value] {
				t.Errorf("item %d committed twice", it.Value)
			}
			committed[it.Value] = true
		}
		batches = append(batches, vs)
		return nil
	})
	const n = 20
	errs := make(chan error, n)
	submit := func(v int) {
		err := c.Submit(context.Background(), v)
		mu.Lock()
		if err == nil && !committed[v] {
			err = errors.New("answered before its commit")
		}
		mu.Unlock()
		errs <- err
	}
	go submit(0)
	<-entered
	for v := 1; v < n; v++ {
		go submit(v)
	}
	for c.QueueDepth() < n-1 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	for { // until Close has closed the queue
		c.mu.RLock()
		closedQueue := c.closed
		c.mu.RUnlock()
		if closedQueue {
			break
		}
		runtime.Gosched()
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-closed
	mu.Lock()
	defer mu.Unlock()
	if len(committed) != n {
		t.Fatalf("committed %d items, want %d", len(committed), n)
	}
	for i := 1; i < len(batches); i++ {
		prev, cur := batches[i-1], batches[i]
		if len(prev) <= 3 {
			continue
		}
		if left := prev[3:]; len(cur) < len(left) || !slices.Equal(cur[:len(left)], left) {
			t.Fatalf("batch %d is %v: want it to begin with %v, left by batch %v", i, cur, left, prev)
		}
	}
	if st := c.Stats(); st.Items != n || st.BatchSizeLast > 3 {
		t.Fatalf("stats: %d items, last batch %d: want %d, at most 3", st.Items, st.BatchSizeLast, n)
	}
}

func TestNoProgressFailsTheBatch(t *testing.T) {
	c := New(Config{}, func(items []*Item[int]) error {
		for _, it := range items {
			it.Later = true
		}
		return nil
	})
	defer c.Close()
	if err := c.Submit(context.Background(), 1); !errors.Is(err, ErrNoProgress) {
		t.Fatalf("got %v, want ErrNoProgress", err)
	}
}

// TestStatsCountABatchBeforeItsAnswer: once Submit returns, Stats counts
// its batch (the writer counts a batch before it answers its items), so a
// caller can read the Stats of its own Writes.
func TestStatsCountABatchBeforeItsAnswer(t *testing.T) {
	c := New(Config{}, func(items []*Item[int]) error { return nil })
	defer c.Close()
	for i := range 2000 {
		if err := c.Submit(t.Context(), i); err != nil {
			t.Fatal(err)
		}
		if s := c.Stats(); s.Items != int64(i+1) || s.Batches != int64(i+1) {
			t.Fatalf("after Submit %d returned: %d items in %d batches counted, want %d", i, s.Items, s.Batches, i+1)
		}
	}
}
