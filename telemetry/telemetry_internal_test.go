package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/surgepay/surgepay"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"no digits", "no digits"},
		{"card 4111111111111111 declined", "card [redacted] declined"},
		{"4111 1111 1111 1111", "[redacted]"},
		{"4111-1111-1111-1111!", "[redacted]!"},
		{"req 4111.1111.1111.1111", "req [redacted]"},
		{"req 4111_1111_1111_1111", "req [redacted]"},
		{"req 4111/1111/1111/1111", "req [redacted]"},
		{"4.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1", "[redacted]"},
		{"v1.2.3 at 10.0.0.1", "v1.2.3 at 10.0.0.1"},
		{"amex 378282246310005", "amex [redacted]"},
		{"short 12345678901", "short 12345678901"},
		{"long 12345678901234567890123", "long 12345678901234567890123"},
		{"ts 1700000000 and 42", "ts 1700000000 and 42"},
		// What the request guard refuses beyond ASCII runs (cardtext.go).
		{"card ４２４２ ４２４２ ４２４２ ４２４２ declined", "card [redacted] declined"},
		{"pan ٤١١١١١١١١١١١١١١١", "pan [redacted]"},
		{"4111 -- 1111 -- 1111 -- 1111", "[redacted]"},
		{"4111\u200b1111\u200b1111\u200b1111!", "[redacted]!"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStackHasNoArguments(t *testing.T) {
	var s string
	func(pan string, n int) { s = Stack() }("4111111111111111", 0x1234567)
	if strings.Contains(s, "0x1234567") || strings.Contains(s, "4111111111111111") {
		t.Errorf("stack holds argument values:\n%s", s)
	}
	if !strings.Contains(s, "TestStackHasNoArguments") {
		t.Errorf("stack lacks the frame:\n%s", s)
	}
}

func TestRedactingHandler(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(RedactingHandler(slog.NewJSONHandler(&b, nil))).With("card", "4242424242424242")
	log.Info("charging 4111111111111111", "err", errors.New("bad card 5555555555554444"),
		slog.Group("g", "n", "378282246310005"), "ok", "pay_123", "wide", "６０１１ ０００９ ９０１３ ９４２４")
	out := b.String()
	for _, pan := range []string{"4242424242424242", "4111111111111111", "5555555555554444", "378282246310005", "６０１１"} {
		if strings.Contains(out, pan) {
			t.Errorf("log holds %s: %s", pan, out)
		}
	}
	if !strings.Contains(out, "pay_123") || strings.Count(out, Redacted) != 5 {
		t.Errorf("got %s, want 5 redactions and pay_123 kept", out)
	}
}

func TestQuantile(t *testing.T) {
	b := func(counts ...float64) []bucket {
		les := []float64{1, 2, 4, math.Inf(1)}
		out := make([]bucket, len(counts))
		for i := range counts {
			out[i] = bucket{le: les[i], count: counts[i]}
		}
		return out
	}
	prev, cur := b(0, 0, 0, 0), b(50, 90, 100, 100) // 50 ≤1, 40 in (1,2], 10 in (2,4]
	for _, tc := range []struct{ q, want float64 }{{.5, 1}, {.7, 1.5}, {.95, 3}, {1, 4}} {
		if got := quantile(tc.q, prev, cur); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v): got %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(.5, cur, cur); !math.IsNaN(got) {
		t.Errorf("quantile of no observations: got %v, want NaN", got)
	}
	if got := quantile(.99, b(0, 0, 0, 0), b(0, 0, 0, 10)); got != 4 {
		t.Errorf("quantile beyond the last bound: got %v, want the last bound 4", got)
	}
}

// blockingExporter holds every export until released.
type blockingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	spans   int
}

func (e *blockingExporter) ExportSpans(ctx context.Context, s []sdktrace.ReadOnlySpan) error {
	<-e.release
	e.mu.Lock()
	e.spans += len(s)
	e.mu.Unlock()
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

func TestSpanQueueDropsWhenFull(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	m := newMetrics(prometheus.NewRegistry())
	const queue = 8
	tp := newTracerProvider(TracingConfig{SampleRatio: 1, QueueSizeMax: queue}, exp, m, "test")
	tr := tp.Tracer("t")
	// The exporter is stuck until the test releases it: an OnEnd that
	// blocked would hang this loop, so finishing it and the drop count
	// below are the proof, with no clock.
	for i := 0; i < 2000; i++ {
		_, sp := tr.Start(context.Background(), "s")
		sp.End()
	}
	dropped := counterValue(t, m.spansDropped)
	if dropped < 2000-queue-ExportBatchSizeMax-1 {
		t.Errorf("dropped %v spans, want at least %d", dropped, 2000-queue-ExportBatchSizeMax-1)
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := float64(exp.spans) + dropped; got != 2000 {
		t.Errorf("exported %d + dropped %v = %v, want 2000", exp.spans, dropped, got)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate("telemetry."); err != nil {
		t.Fatalf("default config: %v", err)
	}
	c.Tracing.Enabled, c.Tracing.SampleRatio, c.Tracing.QueueSizeMax, c.Tracing.Endpoint = true, 2, -1, "localhost:4318"
	err := c.Validate("telemetry.")
	for _, f := range []string{"telemetry.tracing.sample_ratio", "telemetry.tracing.queue_size_max", "telemetry.tracing.endpoint"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("got %v, want an error naming %s", err, f)
		}
	}
	env := map[string]string{"SURGEPAY_TRACING_ENABLED": "true", "SURGEPAY_TRACING_SAMPLE_RATIO": "0.25",
		"SURGEPAY_METRICS_ENABLED": "false"}
	c = DefaultConfig()
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if !c.Tracing.Enabled || c.Tracing.SampleRatio != .25 || c.Metrics.Enabled {
		t.Errorf("ApplyEnv: got %+v", c)
	}
	if err := c.ApplyEnv(func(k string) string { return map[string]string{"SURGEPAY_ACCESS_LOG": "maybe"}[k] }); err == nil ||
		!strings.Contains(err.Error(), "SURGEPAY_ACCESS_LOG") {
		t.Errorf("got %v, want an error naming SURGEPAY_ACCESS_LOG", err)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestDashboardProcessors: the dashboard's per-processor series come from
// the router's metrics: calls, failures and refusals per second, the p99
// of call durations, the breaker's state.
func TestDashboardProcessors(t *testing.T) {
	tel, err := New(DefaultConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := tel.ProcessorMetrics([]string{"stripe_eu", "default"}, nil)
	if err != nil || pm == nil {
		t.Fatalf("ProcessorMetrics: %v, %v", pm, err)
	}
	take := func(at int64) sample {
		mfs, err := tel.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		s := readSample(mfs)
		s.at = time.Unix(at, 0)
		return s
	}
	a := take(100)
	for range 98 {
		pm.Call("stripe_eu", "authorize", "approved", 20*time.Millisecond)
	}
	pm.Call("stripe_eu", "authorize", "unknown", 5*time.Second)
	pm.Call("stripe_eu", "capture", surgepay.NotPerformed, 5*time.Second)
	for range 3 {
		pm.Refused("stripe_eu", "budget")
	}
	pm.Breaker("stripe_eu", "open")
	d := dashboardData([]sample{a, take(102)}, 2)
	got := func(m map[string]series) float64 { return m["stripe_eu"][0] }
	if got(d.ProcCallsPS) != 50 || got(d.ProcFailsPS) != 1 || got(d.ProcRefusedPS) != 1.5 || got(d.ProcBreaker) != 2 {
		t.Fatalf("per second over 2 s: calls %v failures %v refused %v breaker %v; want 50, 1, 1.5, 2",
			got(d.ProcCallsPS), got(d.ProcFailsPS), got(d.ProcRefusedPS), got(d.ProcBreaker))
	}
	if p99 := got(d.ProcP99); p99 < 1000 {
		t.Fatalf("p99 %v ms, want it among the 5 s calls (2 of 100)", p99)
	}
}

// TestStageCollectorCost: the backlog is read at most once a second, and
// after a slow read (a count over millions of records) not again for
// that read's time over stageStatsCostShare, at most a minute; the age of
// the oldest record advances between reads; a failed read keeps the last
// figures and is not retried at once. No scrape waits for a read: each
// reports the last figures (none before the first read ends) and reads
// in the background.
func TestStageCollectorCost(t *testing.T) {
	var mu sync.Mutex // the clock and the script of reads
	clock := time.Unix(1_700_000_000, 0)
	var reads int
	cost := time.Duration(0)
	fail := false
	var hold chan struct{} // if set, the next read waits for it
	c := newStageCollector(func(context.Context) (StageStat, error) {
		mu.Lock()
		h := hold
		hold = nil
		mu.Unlock()
		if h != nil {
			<-h
		}
		mu.Lock()
		defer mu.Unlock()
		reads++
		clock = clock.Add(cost) // the read takes cost
		if fail {
			return StageStat{}, errors.New("store down")
		}
		return StageStat{Depth: 100 * reads, OldestAge: time.Minute}, nil
	})
	c.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	set := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
	}
	// collect scrapes: depth and age, -1 and -1 if neither is reported.
	collect := func() (depth, age float64) {
		t.Helper()
		ch := make(chan prometheus.Metric, 2)
		c.Collect(ch)
		close(ch)
		vals := []float64{}
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				t.Fatal(err)
			}
			vals = append(vals, d.GetGauge().GetValue())
		}
		switch len(vals) {
		case 0:
			return -1, -1
		case 2:
			return vals[0], vals[1]
		}
		t.Fatalf("scrape reported %d series, want 0 or 2", len(vals))
		return 0, 0
	}
	settled := func() {
		c.mu.Lock()
		r := c.reading
		c.mu.Unlock()
		if r != nil {
			<-r
		}
	}
	// step scrapes d after the last step, lets the read it started end,
	// and scrapes again at once.
	step := func(what string, d time.Duration, wantReads int, wantDepth, wantAge float64) {
		t.Helper()
		set(func() { clock = clock.Add(d) })
		collect()
		settled()
		depth, age := collect()
		mu.Lock()
		n := reads
		mu.Unlock()
		if n != wantReads || depth != wantDepth || age != wantAge {
			t.Errorf("%s: reads %d depth %v age %v; want %d, %v, %v", what, n, depth, age, wantReads, wantDepth, wantAge)
		}
	}
	// The first scrape, while the first read is under way, does not wait
	// for it and reports nothing (not a backlog of 0).
	h := make(chan struct{})
	set(func() { hold = h })
	if depth, age := collect(); depth != -1 || age != -1 {
		t.Errorf("first scrape during the first read: depth %v age %v; want no series", depth, age)
	}
	close(h)
	settled()
	step("first scrape after it", 0, 1, 100, 60)
	step("half a second later", 500*time.Millisecond, 1, 100, 60.5)
	step("a second after", 500*time.Millisecond, 2, 200, 60)
	set(func() { cost = 100 * time.Millisecond }) // the backlog grew: the read took 0.1 s, so the next waits 5 s
	step("slow read", time.Second, 3, 300, 60)
	step("4 s after it", 4*time.Second, 3, 300, 64)
	step("5 s after it", time.Second, 4, 400, 60)
	set(func() { cost = 10 * time.Second }) // 500 s by the share: capped at a minute
	step("very slow read", 5*time.Second, 5, 500, 60)
	step("59 s after it", 59*time.Second, 5, 500, 119)
	set(func() { cost, fail = 0, true })
	step("a minute after it, failing", time.Second, 6, 500, 120)
	set(func() { fail = false })
	step("half a second after the failure", 500*time.Millisecond, 6, 500, 120.5)
	step("a second after the failure", 500*time.Millisecond, 7, 700, 60)

	// A scrape while a read is under way reports the last figures at
	// once and starts no second read.
	h = make(chan struct{})
	set(func() { clock, hold = clock.Add(time.Second), h })
	for i := range 3 {
		if depth, age := collect(); depth != 700 || age != 61 {
			t.Errorf("scrape %d during a read: depth %v age %v; want the last, 700 and 61", i, depth, age)
		}
	}
	close(h)
	settled()
	if depth, age := collect(); reads != 8 || depth != 800 || age != 60 {
		t.Errorf("after the read: reads %d depth %v age %v; want 8, 800, 60", reads, depth, age)
	}
}

// TestObserveRequestSeries: the series a request observes, resolved once
// per route and method, count per route, method and status as the
// vectors' own WithLabelValues would, concurrently; a statement kind no
// request used exports no series.
func TestObserveRequestSeries(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	var sale, read surgepay.StatementCounter
	ctx := surgepay.WithStatementCounter(context.Background(), &sale)
	surgepay.CountStatement(ctx, surgepay.StmtInsert)
	surgepay.CountStatement(ctx, surgepay.StmtInsert)
	surgepay.CountStatement(surgepay.WithStatementCounter(context.Background(), &read), surgepay.StmtSelect)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				m.observeRequest("POST /v1/payments", "POST", 200+(i%2)*202, time.Millisecond, &sale)
				if g == 0 {
					m.observeRequest("GET /v1/payments/{id}", "GET", 200, time.Millisecond, &read)
				}
			}
		})
	}
	wg.Wait()
	for _, c := range []struct {
		got  prometheus.Counter
		want float64
	}{
		{m.requests.WithLabelValues("POST /v1/payments", "POST", "200"), 400},
		{m.requests.WithLabelValues("POST /v1/payments", "POST", "402"), 400},
		{m.requests.WithLabelValues("GET /v1/payments/{id}", "GET", "200"), 100},
		{m.sqlStatements.WithLabelValues("POST /v1/payments", "insert"), 1600},
		{m.sqlStatements.WithLabelValues("GET /v1/payments/{id}", "select"), 100},
	} {
		if got := counterValue(t, c.got); got != c.want {
			t.Errorf("%s = %v, want %v", c.got.Desc(), got, c.want)
		}
	}
	// select and insert on the two routes only, and the two just read.
	if n := seriesCount(m.sqlStatements); n != 2 {
		t.Errorf("%d statement series, want 2 (no series for a kind never used)", n)
	}
	if n := seriesCount(m.requestSeconds); n != 2 {
		t.Errorf("%d duration series, want 2", n)
	}
}

// seriesCount returns how many series c exports.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	n := 0
	for range ch {
		n++
	}
	return n
}
