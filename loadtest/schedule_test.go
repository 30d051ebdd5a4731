package loadtest

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// countPerSecond runs a scheduler to the end and counts arrivals per second.
func countPerSecond(plan Plan, poisson bool) []int {
	s := newScheduler(plan, poisson, 7)
	var counts []int
	var last time.Duration
	for {
		off, _, ok := s.next()
		if !ok {
			return counts
		}
		if off < last {
			panic("offsets must not decrease")
		}
		last = off
		for len(counts) <= int(off/time.Second) {
			counts = append(counts, 0)
		}
		counts[off/time.Second]++
	}
}

func TestSchedulerCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan Plan
		want []int
	}{
		{"Constant", Plan{Stages: []Stage{{3 * time.Second, 10, 10}}}, []int{10, 10, 10}},
		{"RampUp", Plan{Stages: []Stage{{4 * time.Second, 0, 80}}}, []int{10, 30, 50, 70}},
		{"RampDown", Plan{Stages: []Stage{{2 * time.Second, 40, 0}}}, []int{30, 10}},
		{"Peak", Plan{Stages: []Stage{{2 * time.Second, 0, 20}, {1 * time.Second, 20, 20}, {2 * time.Second, 20, 0}}}, []int{5, 15, 20, 15, 5}},
		{"Pause", Plan{Stages: []Stage{{time.Second, 10, 10}, {time.Second, 0, 0}, {time.Second, 10, 10}}}, []int{10, 0, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := countPerSecond(tc.plan, false)
			if len(got) != len(tc.want) {
				t.Fatalf("per-second counts = %v, want %v", got, tc.want)
			}
			for i := range got {
				// Arrival n lands at the instant the cumulative count reaches
				// n, so a boundary may move one arrival between seconds.
				if math.Abs(float64(got[i]-tc.want[i])) > 1 {
					t.Errorf("per-second counts = %v, want %v (±1)", got, tc.want)
					break
				}
			}
		})
	}
}

func TestSchedulerFlood(t *testing.T) {
	s := newScheduler(Plan{FloodCount: 5}, false, 1)
	n := 0
	for {
		off, _, ok := s.next()
		if !ok {
			break
		}
		if off != 0 {
			t.Fatalf("flood offset = %v, want 0", off)
		}
		n++
	}
	if n != 5 {
		t.Errorf("flood arrivals = %d, want 5", n)
	}
}

func TestStressPlanSteps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Profile = ProfileStress
	cfg.StartRate, cfg.StepRate, cfg.MaxRate = 10, 20, 70
	cfg.StepDuration, cfg.Duration = 2*time.Second, 7*time.Second
	plan, err := cfg.Plan()
	if err != nil {
		t.Fatal(err)
	}
	wantRates := []float64{10, 30, 50, 70}
	wantDur := []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, time.Second}
	if len(plan.Stages) != len(wantRates) {
		t.Fatalf("stages = %+v, want rates %v", plan.Stages, wantRates)
	}
	for i, s := range plan.Stages {
		if s.RateStart != wantRates[i] || s.RateEnd != wantRates[i] || s.Duration != wantDur[i] {
			t.Errorf("stage %d = %+v, want rate %v for %v", i, s, wantRates[i], wantDur[i])
		}
	}
}

// TestPeakFollowsProfile runs a peak profile against a fast server and
// checks the iterations started in each one-second window against the plan.
// Bounds are loose: CI machines are small and noisy, and a boundary can move
// an arrival or two between windows.
func TestPeakFollowsProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 7s")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	cfg := getConfig(srv.URL, 150, 2*time.Second)
	cfg.Profile = ProfilePeak
	cfg.RampUp, cfg.RampDown = 3*time.Second, 2*time.Second
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{25, 75, 125, 150, 150, 112.5, 37.5}
	got := map[int]Window{}
	for _, w := range res.Windows {
		got[w.Second] = w
	}
	for sec, plan := range want {
		w, ok := got[sec]
		if !ok {
			t.Errorf("second %d: no window", sec)
			continue
		}
		if math.Abs(w.TargetRate-plan) > 0.01 {
			t.Errorf("second %d: target rate %.2f, want %.2f", sec, w.TargetRate, plan)
		}
		if slack := max(0.05*plan, 4); math.Abs(float64(w.Started)-plan) > slack {
			t.Errorf("second %d: started %d, want %.1f ±%.1f", sec, w.Started, plan, slack)
		}
	}
	if total := res.Summary.Iterations; math.Abs(float64(total)-675) > 2 {
		t.Errorf("iterations = %d, want 675", total)
	}
}
