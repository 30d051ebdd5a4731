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

// TestStressFindsCapacity steps 20, 40, 60, 80, ... 200 per second against
// a server that fails beyond 70 per second: 60 holds, 80 breaks the error
// SLO, and the schedule stops there. The SLO is the error rate only: the
// default's p99<250ms is a wall-clock figure that a busy machine breaks at
// any step, and the knee here is the server's, seen in its errors.
func TestStressFindsCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 5s")
	}
	srv := rateLimitedServer(t, 70)
	cfg := getConfig(srv.URL, 1, 20*time.Second)
	cfg.Profile = ProfileStress
	cfg.StartRate, cfg.StepRate, cfg.MaxRate, cfg.StepDuration = 20, 20, 200, time.Second
	cfg.SLO = []Threshold{{Text: "errors<1%", Metric: "errors", Op: "<", Value: 0.01}}
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
	} else if held, broke := st.Steps[2], st.Steps[3]; !(broke.ErrorRate > held.ErrorRate) {
		t.Errorf("error rate at %v/s %.3f, at %v/s %.3f: want the breaking step's higher",
			held.Rate, held.ErrorRate, broke.Rate, broke.ErrorRate)
	}
	// The schedule plans 20+40+...+200 = 1100 iterations; stopped after
	// the fourth step (200), it may have started the fifth and sixth
	// (220) while the fourth was judged, but not the rest.
	if n := res.Summary.Iterations; n >= 550 {
		t.Errorf("%d iterations started, want the schedule stopped after the 80/s step (< 550 of 1100)", n)
	}
}

// TestFloodStartsAllAtOnce: flood starts --vus iterations at offset zero,
// none of them late. (It asserted elapsed < 4s: a wall-clock figure.)
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
	// 50/s for 10s plans 500; cancelled early, it started some, not all.
	if n := res.Summary.Iterations; n < 1 || n >= 500 {
		t.Errorf("iterations = %d, want some of the 500 planned, not all", n)
	}
}
