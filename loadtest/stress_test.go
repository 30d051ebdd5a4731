package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// rateLimitedServer answers 500 whenever it has seen more than limit
// requests in the last second: a server whose capacity is limit per second.
func rateLimitedServer(t *testing.T, limit int) *httptest.Server {
	var mu sync.Mutex
	var seen []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		mu.Lock()
		seen = append(seen, now)
		for len(seen) > 0 && now.Sub(seen[0]) > time.Second {
			seen = seen[1:]
		}
		over := len(seen) > limit
		mu.Unlock()
		if over {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStressFindsCapacity steps 20, 40, 60, 80, 100 per second against a
// server that fails beyond 70 per second: 60 holds, 80 breaks the error
// SLO, and the run stops there.
func TestStressFindsCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 5s")
	}
	srv := rateLimitedServer(t, 70)
	cfg := getConfig(srv.URL, 1, 20*time.Second)
	cfg.Profile = ProfileStress
	cfg.StartRate, cfg.StepRate, cfg.MaxRate, cfg.StepDuration = 20, 20, 100, time.Second
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stress
	if st == nil {
		t.Fatal("no stress result")
	}
	for _, s := range st.Steps {
		t.Logf("step %v: held=%v errors=%.3f p99=%.1fms %s", s.Rate, s.Held, s.ErrorRate, s.P99, s.Reason)
	}
	if st.CapacityRate != 60 || !st.Broken {
		t.Errorf("capacity = %v, broken = %v, want 60, true", st.CapacityRate, st.Broken)
	}
	if n := len(st.Steps); n != 4 {
		t.Errorf("%d steps evaluated, want 4 (stopped at the first breach)", n)
	}
	if res.Summary.ElapsedSeconds > 5.5 {
		t.Errorf("elapsed %.1fs, want the schedule stopped soon after the 80/s step", res.Summary.ElapsedSeconds)
	}
}

// TestFloodStartsAllAtOnce: flood starts --vus iterations at offset zero.
func TestFloodStartsAllAtOnce(t *testing.T) {
	srv := okServer(t)
	cfg := getConfig(srv.URL, 1, 5*time.Second)
	cfg.Profile = ProfileFlood
	cfg.VUs = 200
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Iterations != 200 || res.Summary.Errors != 0 {
		t.Errorf("iterations = %d, errors = %d, want 200, 0", res.Summary.Iterations, res.Summary.Errors)
	}
	if res.Summary.ElapsedSeconds > 4 {
		t.Errorf("elapsed = %.1fs, want all iterations done at once", res.Summary.ElapsedSeconds)
	}
}

// TestInterruptedRun: cancelling the context stops the run early with
// partial results and ExitInterrupted.
func TestInterruptedRun(t *testing.T) {
	srv := okServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, getConfig(srv.URL, 50, 10*time.Second), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Summary.Interrupted || exitCode(res) != ExitInterrupted {
		t.Errorf("interrupted = %v, exit %d, want true, %d", res.Summary.Interrupted, exitCode(res), ExitInterrupted)
	}
	if n := res.Summary.Iterations; n < 10 || n > 40 {
		t.Errorf("iterations = %d, want about 25", n)
	}
}
