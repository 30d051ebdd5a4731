package loadtest

import (
	"context"
	"fmt"
	"time"
)

// stressPollInterval is how often the stress monitor checks whether a
// finished step's iterations have all completed.
const stressPollInterval = 50 * time.Millisecond

// stressMonitor judges each stress step against the SLO once the step's
// iterations have completed, or one step duration after it ended, and stops
// the schedule at the first step that breaks it. The capacity is the rate
// of the last step that held. It runs in its own goroutine; its fields are
// read after done is closed.
type stressMonitor struct {
	plan  Plan
	slo   []Threshold
	rec   *Recorder
	pacer *pacer
	done  chan struct{}

	steps    []StressStep
	capacity float64
	broken   bool
}

func newStressMonitor(plan Plan, slo []Threshold, rec *Recorder, p *pacer) *stressMonitor {
	return &stressMonitor{plan: plan, slo: slo, rec: rec, pacer: p, done: make(chan struct{})}
}

// run evaluates steps in order; stop cancels the schedule on a breach.
func (m *stressMonitor) run(ctx context.Context, stop context.CancelFunc) {
	defer close(m.done)
	for i, st := range m.plan.Stages {
		end := m.pacer.start.Add(m.plan.StageBegin(i) + st.Duration)
		if !sleepUntil(ctx, end) {
			return
		}
		deadline := end.Add(max(st.Duration, time.Second))
		for !m.stepDone(i) && time.Now().Before(deadline) {
			if !sleepUntil(ctx, time.Now().Add(stressPollInterval)) {
				return
			}
		}
		step := m.evaluate(i, st)
		m.steps = append(m.steps, step)
		if !step.Held {
			m.broken = true
			stop()
			return
		}
		m.capacity = step.Rate
	}
}

func (m *stressMonitor) stepDone(i int) bool {
	_, _, completed, _ := m.rec.stageSnapshot(i)
	return completed >= m.pacer.stageLaunched[i].Load()
}

// evaluate judges step i against the SLO. Dropped iterations, or
// iterations still running after the settle time, break it too.
func (m *stressMonitor) evaluate(i int, st Stage) StressStep {
	requests, errors, completed, lat := m.rec.stageSnapshot(i)
	launched := m.pacer.stageLaunched[i].Load()
	step := StressStep{
		Rate:         st.RateEnd,
		AchievedRate: float64(launched) / st.Duration.Seconds(),
		Requests:     requests,
		P99:          lat.P99,
		Dropped:      m.pacer.stageDropped[i].Load(),
		Evaluated:    true,
	}
	if requests > 0 {
		step.ErrorRate = float64(errors) / float64(requests)
	}
	probe := &Result{Summary: Summary{Requests: requests, ErrorRate: step.ErrorRate, AchievedRate: step.AchievedRate}}
	probe.Latency.Corrected = lat
	step.Held = true
	for _, t := range m.slo {
		if tr := t.Evaluate(probe); !tr.OK {
			step.Held = false
			step.Reason = fmt.Sprintf("%s (observed %.4g)", t.Text, tr.Observed)
			break
		}
	}
	switch {
	case step.Dropped > 0:
		step.Held, step.Reason = false, fmt.Sprintf("%d iterations dropped at --max-inflight", step.Dropped)
	case completed < launched:
		step.Held, step.Reason = false, fmt.Sprintf("%d iterations still running after the step", launched-completed)
	}
	return step
}

// result returns the stress report, including the step the run stopped in.
func (m *stressMonitor) result() *StressResult {
	return &StressResult{Steps: m.steps, CapacityRate: m.capacity, Broken: m.broken}
}

// sleepUntil sleeps until t; false when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
