package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"
)

// InterruptDrainTimeout bounds the wait for in-flight iterations after the
// run was cancelled: the operator asked to stop.
const InterruptDrainTimeout = 2 * time.Second

// UsageError reports a configuration or set-up problem (ExitUsage).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Options controls a run's live output.
type Options struct {
	// Log receives progress and warnings; nil is silent.
	Log io.Writer
	// Live enables the mpb progress display; otherwise a progress line is
	// printed every ProgressLineInterval.
	Live bool
}

// Run validates cfg, sets up test data, runs the load and returns the
// result with thresholds evaluated. A cancelled ctx stops the schedule,
// drains briefly and returns the partial result with Interrupted set.
func Run(ctx context.Context, cfg Config, opts Options) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, &UsageError{err}
	}
	plan, _ := cfg.Plan()
	tc, _ := cfg.clientTLS() // checked by Validate
	cl := newClient(cfg.URL, cfg.APIKey, cfg.Timeout, cfg.MaxInflight, tc)
	cl.setPublishableKey(cfg.PublishableKey)
	defer cl.close()
	e := &env{
		cl: cl, pool: &pool{}, runID: newRunID(), path: cfg.Path,
		declineRate: cfg.DeclineRate, declineCard: testCards[cfg.DeclineCard],
	}
	if err := setup(ctx, &cfg, e, opts.Log); err != nil {
		return nil, err
	}
	r := newRun(&cfg, plan, e, opts)
	r.execute(ctx)
	res := r.result(ctx.Err() != nil)
	evaluateThresholds(res, cfg.Thresholds)
	return res, nil
}

// setup fills the customer pool when a scenario of the mix needs it.
func setup(ctx context.Context, cfg *Config, e *env, log io.Writer) error {
	needed := false
	for _, m := range cfg.Mix {
		sc, _ := scenarioByName(m.Name)
		needed = needed || sc.pool
	}
	if !needed {
		return nil
	}
	if cfg.SetupCustomers == 0 {
		return &UsageError{errors.New("the scenarios need set-up customers: --setup-customers must be positive")}
	}
	logf(log, "set-up: creating %d customers with saved cards (not measured)\n", cfg.SetupCustomers)
	p, err := setupPool(ctx, e, cfg.SetupCustomers, cfg.Seed)
	if err != nil {
		return &UsageError{err}
	}
	e.pool = p
	return nil
}

// run is one measured run in progress.
type run struct {
	cfg     *Config
	plan    Plan
	opts    Options
	start   time.Time
	rec     *Recorder
	pacer   *pacer
	res     *resourceMonitor
	monitor *stressMonitor
	end     time.Time
}

func newRun(cfg *Config, plan Plan, e *env, opts Options) *run {
	start := time.Now()
	e.rec = newRecorder(start, cfg.LateThreshold, len(plan.Stages))
	r := &run{cfg: cfg, plan: plan, opts: opts, start: start, rec: e.rec}
	r.pacer = newPacer(plan, cfg, start, e)
	r.res = newResourceMonitor(cfg, start)
	if cfg.Profile == ProfileStress {
		r.monitor = newStressMonitor(plan, cfg.SLO, r.rec, r.pacer)
	}
	return r
}

// execute runs the schedule, drains, and stops the background loops.
func (r *run) execute(ctx context.Context) {
	bg, stopBG := context.WithCancel(context.Background())
	windowsDone := make(chan struct{})
	go func() {
		r.rec.windowLoop(bg.Done())
		close(windowsDone)
	}()
	go r.res.loop(bg)
	disp := startDisplay(r.opts, r.status, r.plan)
	pacerCtx, stopPacer := context.WithCancel(ctx)
	iterCtx, cancelIterations := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelIterations()
	if r.monitor != nil {
		go r.monitor.run(pacerCtx, stopPacer)
	}
	r.pacer.run(pacerCtx, iterCtx)
	drain := r.cfg.DrainTimeout
	if ctx.Err() != nil {
		drain = min(drain, InterruptDrainTimeout)
	}
	r.pacer.drain(drain, cancelIterations)
	if r.pacer.truncated {
		// Steps after --max-iterations never ran; do not wait for them.
		stopPacer()
	}
	if r.monitor != nil {
		<-r.monitor.done
	}
	stopPacer()
	r.end = time.Now()
	stopBG()
	<-windowsDone
	r.rec.finishWindows(r.end)
	<-r.res.done
	disp.stop()
}

// liveStatus is what the progress display shows.
type liveStatus struct {
	elapsed, total  time.Duration
	rate, p99       float64
	requests, errs  int64
	inflight, drops int64
}

// status is called by the display goroutine; safe for concurrent use.
func (r *run) status() liveStatus {
	s := liveStatus{
		elapsed:  time.Since(r.start),
		total:    r.plan.Duration(),
		inflight: r.pacer.inflight.Load(),
		drops:    r.pacer.dropped.Load(),
	}
	s.requests, s.errs = r.rec.totals()
	if w, ok := r.rec.lastWindow(); ok && w.DurationSeconds > 0 {
		s.rate = float64(w.Requests) / w.DurationSeconds
		s.p99 = w.Corrected.P99
	}
	return s
}

// newRunID returns a short random ID that makes generated e-mail addresses
// unique across runs.
func newRunID() string {
	return strconv.FormatUint(rand.Uint64()>>24, 36) //nolint:gosec // G404: unique, not secret
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}
