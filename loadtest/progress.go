package loadtest

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// display shows the run's progress: an mpb bar on a terminal, a plain line
// every ProgressLineInterval otherwise, nothing when Options.Log is nil. It
// also prints, once, the warning that iterations are being dropped.
type display struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startDisplay(opts Options, status func() liveStatus, plan Plan) *display {
	ctx, cancel := context.WithCancel(context.Background())
	d := &display{cancel: cancel, done: make(chan struct{})}
	switch {
	case opts.Log == nil:
		close(d.done)
	case opts.Live:
		go d.live(ctx, opts.Log, status, plan)
	default:
		go d.lines(ctx, opts.Log, status)
	}
	return d
}

func (d *display) stop() {
	d.cancel()
	<-d.done
}

// live drives an mpb bar whose total is the planned duration in
// milliseconds (flood has none: the bar shows elapsed time only).
func (d *display) live(ctx context.Context, w io.Writer, status func() liveStatus, plan Plan) {
	defer close(d.done)
	p := mpb.New(mpb.WithOutput(w), mpb.WithRefreshRate(ProgressRefreshInterval), mpb.WithWidth(32))
	total := max(plan.Duration().Milliseconds(), 1)
	bar := p.AddBar(total,
		mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return elapsedText(status()) })),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return statusText(status()) })),
	)
	tick := time.NewTicker(ProgressRefreshInterval)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			// The bar was built with a positive total, so reaching it is
			// what completes the bar and lets Wait return.
			bar.SetCurrent(total)
			p.Wait()
			return
		case <-tick.C:
			s := status()
			bar.SetCurrent(min(s.elapsed.Milliseconds(), total))
			warned = warnDrops(p, s, warned)
		}
	}
}

// lines prints a progress line every ProgressLineInterval.
func (d *display) lines(ctx context.Context, w io.Writer, status func() liveStatus) {
	defer close(d.done)
	tick := time.NewTicker(ProgressRefreshInterval)
	defer tick.Stop()
	warned := false
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s := status()
			warned = warnDrops(w, s, warned)
			if now.Sub(last) >= ProgressLineInterval {
				last = now
				fmt.Fprintf(w, "loadtest: %s %s\n", elapsedText(s), statusText(s))
			}
		}
	}
}

// warnDrops prints the drop warning the first time drops are seen.
func warnDrops(w io.Writer, s liveStatus, warned bool) bool {
	if warned || s.drops == 0 {
		return warned
	}
	fmt.Fprintf(w, "WARNING: --max-inflight reached with %d iterations in flight: dropping arrivals; the run will fail its thresholds\n", s.inflight)
	return true
}

func elapsedText(s liveStatus) string {
	if s.total <= 0 {
		return s.elapsed.Truncate(time.Second).String()
	}
	return s.elapsed.Truncate(time.Second).String() + "/" + s.total.String()
}

func statusText(s liveStatus) string {
	rate := 0.0
	if s.requests > 0 {
		rate = 100 * float64(s.errs) / float64(s.requests)
	}
	return fmt.Sprintf("rate=%.0f/s p99=%.1fms errors=%d (%.2f%%) inflight=%d dropped=%d",
		s.rate, s.p99, s.errs, rate, s.inflight, s.drops)
}
