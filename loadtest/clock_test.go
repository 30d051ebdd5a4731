package loadtest

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// stallServer answers at once, except that during [k*period, k*period+stall)
// after its first request it holds every response until the stall ends. It
// models a server that freezes (a GC pause, a lock, a failover).
func stallServer(t *testing.T, period, stall time.Duration) *httptest.Server {
	t.Helper()
	var once sync.Once
	var first time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { first = time.Now() })
		since := time.Since(first)
		if phase := since % period; phase < stall {
			time.Sleep(stall - phase)
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// getConfig returns a quiet "get" run against url.
func getConfig(url string, rate float64, d time.Duration) Config {
	cfg := DefaultConfig()
	cfg.URL = url
	cfg.Mix = []MixEntry{{Name: "get", Weight: 1}}
	cfg.Rate = rate
	cfg.Duration = d
	cfg.DrainTimeout = 10 * time.Second
	return cfg
}

// TestCorrectedLatencySeesStall: a server that stalls for 1s every 5s must
// show a corrected p99 of most of the stall, many times the median service
// time. A closed-loop injector that measured only service time, or waited
// for responses before sending, would report far less. The bounds are the
// injected stall and ratios within the run, never this machine's speed.
func TestCorrectedLatencySeesStall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 6s")
	}
	const stall = time.Second
	srv := stallServer(t, 5*time.Second, stall)
	res, err := Run(context.Background(), getConfig(srv.URL, 100, 6*time.Second), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, s := res.Latency.Corrected, res.Latency.Service
	t.Logf("corrected p50=%.1fms p99=%.1fms max=%.1fms; service p50=%.1fms p99=%.1fms; late=%d",
		c.P50, c.P99, c.Max, s.P50, s.P99, res.Summary.LateStarts)
	if stallMs := float64(stall.Milliseconds()); c.P99 < 0.7*stallMs {
		t.Errorf("corrected p99 = %.1fms, want at least 70%% of the %.0fms stall", c.P99, stallMs)
	}
	if c.P99 < 5*s.P50 {
		t.Errorf("corrected p99 = %.1fms, service p50 = %.1fms: want the stall to dominate (5x at least)", c.P99, s.P50)
	}
	if res.Summary.Errors != 0 || res.Summary.Dropped != 0 {
		t.Errorf("errors = %d, dropped = %d, want 0, 0", res.Summary.Errors, res.Summary.Dropped)
	}
	if got := res.Summary.Iterations; got != 600 {
		t.Errorf("iterations = %d, want 600", got)
	}
}

// TestRateTimesDuration: at rate R for T seconds against a server that
// keeps up, R·T iterations are sent (±1%) and each makes one request.
func TestRateTimesDuration(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		poisson bool
		slack   float64
	}{
		{"Even", false, 0.01},
		// Poisson counts have a standard deviation of sqrt(R·T) ≈ 24.5;
		// five of them keep the test from flaking.
		{"Poisson", true, 5 * math.Sqrt(600) / 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := getConfig(srv.URL, 200, 3*time.Second)
			cfg.Poisson = tc.poisson
			res, err := Run(context.Background(), cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := 600.0
			if got := float64(res.Summary.Iterations); math.Abs(got-want) > tc.slack*want {
				t.Errorf("iterations = %v, want %v ±%.1f%%", got, want, 100*tc.slack)
			}
			if res.Summary.Requests != res.Summary.Iterations || res.Summary.Errors != 0 {
				t.Errorf("requests = %d, errors = %d, want %d, 0", res.Summary.Requests, res.Summary.Errors, res.Summary.Iterations)
			}
			// Achieved is iterations over the elapsed time, which a busy
			// machine stretches; the pacer must never run ahead of the plan.
			if res.Summary.AchievedRate > 200*(1+tc.slack) {
				t.Errorf("achieved rate = %.1f, want at most the planned 200", res.Summary.AchievedRate)
			}
		})
	}
}

// TestCorrectedFromIntendedStart: an iteration that starts 300ms after its
// intended time (the CPU was busy, the pacer was late) is charged those
// 300ms in corrected latency but not in service time, and counts as late.
// Its second request is measured from the end of its first, so the lag is
// charged once: corrected minus service totals 300ms plus the moment
// between the two requests, not twice 300ms. No bound is this machine's
// speed.
func TestCorrectedFromIntendedStart(t *testing.T) {
	srv := okServer(t)
	rec := newRecorder(time.Now(), DefaultLateThreshold, 1)
	cl := newClient(srv.URL, "", 5*time.Second, 10, nil)
	defer cl.close()
	e := &env{cl: cl, rec: rec, pool: &pool{}, path: "/"}
	it := &iteration{ctx: context.Background(), env: e, next: time.Now().Add(-300 * time.Millisecond)}
	runGet(it)
	runGet(it)
	c, s := rec.active.corrected[typeGet], rec.active.service[typeGet]
	if c.TotalCount() != 2 {
		t.Fatalf("recorded %d requests, want 2", c.TotalCount())
	}
	lag := 300.0
	if got := usToMs(c.Max()); got < lag {
		t.Errorf("corrected max = %.1fms, want the %.0fms lag plus service time", got, lag)
	}
	// Each histogram holds two values: its mean times two is their sum.
	if charged := 2 * (c.Mean() - s.Mean()) / 1000; charged < 0.95*lag || charged >= 2*lag {
		t.Errorf("corrected minus service = %.1fms, want the %.0fms lag charged once", charged, lag)
	}
	if rec.late != 1 {
		t.Errorf("late starts = %d, want 1", rec.late)
	}
}

// TestIterationGoroutinesReused: iterations that do not overlap run on the
// goroutines of earlier ones, and a burst of slow iterations gets a
// goroutine each, so none waits for another. Counts only, no timing bound:
// at 100/s against a server that answers at once, an arrival finds a
// goroutine idle for under workerIdleMax unless the machine stalls for
// most of a second.
func TestIterationGoroutinesReused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	cfg := getConfig(srv.URL, 100, 2*time.Second)
	cl := newClient(srv.URL, "", 5*time.Second, cfg.MaxInflight, nil)
	defer cl.close()
	plan, _ := cfg.Plan()
	r := newRun(&cfg, plan, &env{cl: cl, pool: &pool{}, path: cfg.Path}, Options{})
	r.execute(context.Background())
	if got := r.pacer.started.Load(); got != 200 {
		t.Fatalf("started %d iterations, want 200", got)
	}
	if w := r.pacer.workers.Load(); w > 20 {
		t.Errorf("%d goroutines ran 200 iterations that did not overlap; want the idle ones reused", w)
	}

	// 50 iterations held by the server at once: 50 goroutines, none queued.
	release := make(chan struct{})
	var held sync.WaitGroup
	held.Add(50)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Done()
		<-release
		w.Write([]byte("ok"))
	}))
	defer slow.Close()
	go func() { held.Wait(); close(release) }()
	cfg = getConfig(slow.URL, 500, time.Second)
	cfg.MaxIterations = 50
	cl2 := newClient(slow.URL, "", 30*time.Second, cfg.MaxInflight, nil)
	defer cl2.close()
	plan, _ = cfg.Plan()
	r = newRun(&cfg, plan, &env{cl: cl2, pool: &pool{}, path: cfg.Path}, Options{})
	r.execute(context.Background())
	if s, w := r.pacer.started.Load(), r.pacer.workers.Load(); s != 50 || w != 50 {
		t.Errorf("a burst of %d held iterations ran on %d goroutines; want 50 and 50", s, w)
	}
}
