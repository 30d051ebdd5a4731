package loadtest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// pacer is the single goroutine that starts iterations at their intended
// times. It never waits for an iteration: each runs on a goroutine of its
// own while it lasts, up to maxInflight at once, beyond which arrivals are
// dropped and counted. A goroutine whose iteration ended takes the next
// arrival if it comes within workerIdleMax (else a new one starts): a new
// goroutine grew its stack through net/http's client on every iteration,
// 8 % of the injector's CPU at 2,500/s.
type pacer struct {
	sched         *scheduler
	start         time.Time
	maxIterations int64
	maxInflight   int64
	lateThreshold time.Duration
	seed          uint64
	env           *env
	picker        picker
	rec           *Recorder

	inflight      atomic.Int64
	started       atomic.Int64
	workers       atomic.Int64 // goroutines started to run iterations
	dropped       atomic.Int64
	pacerLate     atomic.Int64 // launched later than lateThreshold by the pacer itself
	stageLaunched []atomic.Int64
	stageDropped  []atomic.Int64
	wg            sync.WaitGroup // iterations in flight
	idle          chan arrival   // unbuffered: a send reaches only an idle worker; closed when run returns

	// Owned by the pacer goroutine until run returns.
	startedPerSecond []int64
	droppedPerSecond []int64
	scheduled        int64
	end              time.Time
	truncated        bool // stopped by maxIterations
	exhausted        bool // the schedule ran to its end
}

func newPacer(plan Plan, cfg *Config, start time.Time, e *env) *pacer {
	n := max(len(plan.Stages), 1)
	return &pacer{
		sched:         newScheduler(plan, cfg.Poisson, cfg.Seed),
		start:         start,
		maxIterations: cfg.MaxIterations,
		maxInflight:   cfg.MaxInflight,
		lateThreshold: cfg.LateThreshold,
		seed:          cfg.Seed,
		env:           e,
		picker:        newPicker(cfg.Mix),
		rec:           e.rec,
		stageLaunched: make([]atomic.Int64, n),
		stageDropped:  make([]atomic.Int64, n),
		idle:          make(chan arrival),
	}
}

// workerIdleMax is how long a goroutine whose iteration ended waits for the
// next arrival before it exits, so that the goroutines of a burst (a
// stalled server holds thousands of iterations) do not outlive it.
const workerIdleMax = time.Second

// arrival is an iteration to start.
type arrival struct {
	ctx      context.Context
	i        int64
	intended time.Time
	stage    int
}

// run walks the schedule until it is exhausted, maxIterations is reached or
// ctx is cancelled. Iterations run with iterCtx, which outlives ctx so that
// stopping the schedule does not abort requests already sent.
func (p *pacer) run(ctx, iterCtx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := int64(0); ; i++ {
		offset, stage, ok := p.sched.next()
		if !ok {
			p.exhausted = true
			break
		}
		if i >= p.maxIterations {
			p.truncated = true
			break
		}
		intended := p.start.Add(offset)
		if !waitUntil(ctx, timer, intended) {
			break
		}
		p.scheduled++
		p.launch(iterCtx, i, intended, stage)
	}
	p.end = time.Now()
	close(p.idle)
}

// launch starts iteration i, or drops it when the in-flight ceiling is hit.
func (p *pacer) launch(iterCtx context.Context, i int64, intended time.Time, stage int) {
	now := time.Now()
	second := int(now.Sub(p.start) / WindowDuration)
	if p.inflight.Load() >= p.maxInflight {
		p.dropped.Add(1)
		p.stageDropped[stage].Add(1)
		p.droppedPerSecond = countSecond(p.droppedPerSecond, second)
		return
	}
	if now.Sub(intended) > p.lateThreshold {
		p.pacerLate.Add(1)
	}
	p.inflight.Add(1)
	p.started.Add(1)
	p.stageLaunched[stage].Add(1)
	p.startedPerSecond = countSecond(p.startedPerSecond, second)
	p.wg.Add(1)
	a := arrival{ctx: iterCtx, i: i, intended: intended, stage: stage}
	select {
	case p.idle <- a:
	default:
		p.workers.Add(1)
		go p.work(a)
	}
}

// work runs a, then the arrivals it takes while idle, until none comes
// within workerIdleMax or the pacer stops.
func (p *pacer) work(a arrival) {
	timer := time.NewTimer(workerIdleMax)
	defer timer.Stop()
	for {
		p.iterate(a.ctx, a.i, a.intended, a.stage)
		timer.Reset(workerIdleMax)
		select {
		case next, ok := <-p.idle:
			if !ok {
				return
			}
			a = next
		case <-timer.C:
			return
		}
	}
}

// iterate runs one iteration of a scenario chosen from the mix.
func (p *pacer) iterate(ctx context.Context, i int64, intended time.Time, stage int) {
	defer p.wg.Done()
	defer p.inflight.Add(-1)
	rng := rand.New(rand.NewPCG(p.seed, uint64(i))) //nolint:gosec // G404: seeded on purpose, so a run can be repeated
	sc := p.picker.pick(rng)
	it := iteration{ctx: ctx, env: p.env, rng: rng, index: i, stage: stage, next: intended}
	scenarioTable[sc].run(&it)
	p.rec.iterationDone(sc, stage, it.next.Sub(intended), it.failed)
}

// drain waits for in-flight iterations for up to timeout, then cancels
// them and waits for them to return.
func (p *pacer) drain(timeout time.Duration, cancel context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		cancel()
		<-done
	}
}

// waitUntil sleeps until t; it returns false when ctx ends first. When the
// pacer is behind it does not sleep, so overdue iterations start at once.
func waitUntil(ctx context.Context, timer *time.Timer, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	timer.Reset(d)
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// countSecond increments counts[second], growing the slice as needed.
func countSecond(counts []int64, second int) []int64 {
	assert(second >= 0, "seconds count from the start")
	for len(counts) <= second {
		counts = append(counts, 0)
	}
	counts[second]++
	return counts
}
