package telemetry

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The flight recorder keeps the last seconds of the Go execution trace in
// memory (runtime/trace.FlightRecorder) and writes them to a file when the
// server stalls: a group commit slower than the slow-commit threshold, or
// a request refused for backpressure. A stall in the middle of a
// half-hour event cannot be foreseen, and by the time anyone looks it is
// over; the file shows what every goroutine did in the seconds before it
// (`go tool trace FILE`): which waited for a core, on the disk or on a
// lock, and for how long. An execution trace holds stacks, goroutine and
// thread IDs and timings, never a value a request carried.

// Defaults and bounds of the flight recorder ([flight_recorder]).
const (
	// FlightWindowDefault is how much of the past a file holds at least.
	FlightWindowDefault = 10 * time.Second
	// FlightBytesMaxDefault bounds the memory the window takes (a hint to
	// the runtime, which wins over the window): at 3,000 sales/s a second
	// of trace is about 1 MB.
	FlightBytesMaxDefault = 32 << 20
	// FlightEveryDefault spaces two files: an episode of stalls writes
	// one, not one per stall.
	FlightEveryDefault = time.Minute
	// FlightFilesMaxDefault bounds the files kept: the oldest go first.
	FlightFilesMaxDefault = 10
	// FlightAfterDefault is how long after its trigger a file is written,
	// so that it holds the first seconds of the stall as well as what led
	// to it: a slow commit triggers at its end, a refusal at the start of
	// an episode. At most half the window.
	FlightAfterDefault = 3 * time.Second
)

// Reasons a flight-recorder file is written, in its name.
const (
	FlightSlowCommit = "slow_commit"
	FlightShed       = "shed"
)

// FlightConfig configures a FlightRecorder. Zero fields take the defaults.
type FlightConfig struct {
	// Dir receives the files (created if missing). Required.
	Dir      string
	Window   time.Duration
	BytesMax uint64
	Every    time.Duration
	FilesMax int
	// After is FlightAfterDefault unless set; negative: at once.
	After  time.Duration
	Logger *slog.Logger
}

// FlightRecorder keeps the recent execution trace and writes it to
// Config.Dir on Trigger. Safe for concurrent use; one per process (the
// runtime allows one active flight recorder).
type FlightRecorder struct {
	cfg FlightConfig
	fr  *trace.FlightRecorder
	now func() time.Time

	quietUntil atomic.Int64 // Unix nanoseconds: last + Every

	mu      sync.Mutex
	last    time.Time // of the last file begun
	writing bool
	stopped bool
	stopc   chan struct{} // closed by Stop: a file waiting for After is written at once
	wg      sync.WaitGroup
	written int
}

// flightPrefix and flightSuffix frame the name of a file the recorder
// wrote: surgepay-flight-20261127T160203.123Z-slow_commit.trace.
const (
	flightPrefix = "surgepay-flight-"
	flightSuffix = ".trace"
)

// StartFlightRecorder starts recording. Stop ends it.
func StartFlightRecorder(cfg FlightConfig) (*FlightRecorder, error) {
	if cfg.Dir == "" {
		return nil, errors.New("flight recorder: no directory")
	}
	if cfg.Window <= 0 {
		cfg.Window = FlightWindowDefault
	}
	if cfg.BytesMax == 0 {
		cfg.BytesMax = FlightBytesMaxDefault
	}
	if cfg.Every <= 0 {
		cfg.Every = FlightEveryDefault
	}
	if cfg.FilesMax <= 0 {
		cfg.FilesMax = FlightFilesMaxDefault
	}
	if cfg.After == 0 {
		cfg.After = FlightAfterDefault
	}
	cfg.After = min(cfg.After, cfg.Window/2)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("flight recorder: %w", err)
	}
	r := &FlightRecorder{cfg: cfg, now: time.Now, stopc: make(chan struct{}),
		fr: trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: cfg.Window, MaxBytes: cfg.BytesMax})}
	if err := r.fr.Start(); err != nil {
		return nil, fmt.Errorf("flight recorder: %w", err)
	}
	return r, nil
}

// Trigger writes the window to a new file in the background, After from
// now, unless one is being written or the last began less than Every ago. It never waits:
// it is called on the writer's goroutine and in requests.
func (r *FlightRecorder) Trigger(reason string) {
	if r == nil {
		return
	}
	now := r.now()
	// Every refused request of an episode calls this: within Every of the
	// last file it returns on one atomic load, not the lock.
	if now.UnixNano() < r.quietUntil.Load() {
		return
	}
	r.mu.Lock()
	if r.stopped || r.writing || (!r.last.IsZero() && now.Sub(r.last) < r.cfg.Every) {
		r.mu.Unlock()
		return
	}
	r.writing, r.last = true, now
	r.quietUntil.Store(now.Add(r.cfg.Every).UnixNano())
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		if r.cfg.After > 0 {
			t := time.NewTimer(r.cfg.After)
			select {
			case <-t.C:
			case <-r.stopc:
				t.Stop()
			}
		}
		path, n, err := r.writeFile(now, reason)
		r.mu.Lock()
		r.writing = false
		if err == nil {
			r.written++
		}
		r.mu.Unlock()
		if err != nil {
			r.cfg.Logger.Warn("flight recorder: trace not written", "reason", reason, "err", err.Error())
			return
		}
		r.cfg.Logger.Warn("flight recorder: execution trace written", "reason", reason, "path", path, "bytes", n,
			"read_with", "go tool trace "+path)
		r.prune()
	}()
}

// writeFile writes the window to a file named for now and reason, whole or
// not at all (a temporary name until it is complete).
func (r *FlightRecorder) writeFile(now time.Time, reason string) (string, int64, error) {
	name := flightPrefix + now.UTC().Format("20060102T150405.000Z") + "-" + reason + flightSuffix
	path := filepath.Join(r.cfg.Dir, name)
	f, err := os.CreateTemp(r.cfg.Dir, ".flight-*")
	if err != nil {
		return "", 0, err
	}
	n, err := r.fr.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // best effort: the write's error is the one to report
		return "", 0, err
	}
	return path, n, nil
}

// prune removes the oldest files beyond FilesMax.
func (r *FlightRecorder) prune() {
	ents, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, flightPrefix) && strings.HasSuffix(n, flightSuffix) {
			names = append(names, n)
		}
	}
	slices.Sort(names) // by time: the names begin with it
	for len(names) > r.cfg.FilesMax {
		_ = os.Remove(filepath.Join(r.cfg.Dir, names[0])) // a file left behind is pruned next time
		names = names[1:]
	}
}

// WriteTo writes the window as it is now to w (the admin listener's
// /debug/flight-recorder). It fails while a file is being written.
func (r *FlightRecorder) WriteTo(w io.Writer) (int64, error) { return r.fr.WriteTo(w) }

// Written returns the files written since start.
func (r *FlightRecorder) Written() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written
}

// Stop waits for a file being written and stops recording; once only.
func (r *FlightRecorder) Stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	was := r.stopped
	r.stopped = true
	r.mu.Unlock()
	if was {
		return
	}
	close(r.stopc)
	r.wg.Wait()
	r.fr.Stop()
}
