// Package statelog logs a dependency's health by its changes of state, not
// by request: when a database, a cache or a stage fails under load, a line
// per failed request would flood the log with thousands of copies of one
// fact. A Tracker writes one warning when the dependency starts failing
// and one line when it works again, with how many calls failed meanwhile
// and for how long.
package statelog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker follows one dependency. Safe for concurrent use; a success
// while the dependency is healthy costs one atomic load.
type Tracker struct {
	log  *slog.Logger
	what string // e.g. "stage", names the dependency in the lines

	failing atomic.Bool
	mu      sync.Mutex
	since   time.Time
	failed  int64
	now     func() time.Time
}

// New returns a Tracker that logs to log under the name what.
func New(log *slog.Logger, what string) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tracker{log: log, what: what, now: time.Now}
}

// Fail records a failed call. The first failure after a success is
// logged at warning level with err and attrs; later ones are only counted.
func (t *Tracker) Fail(err error, attrs ...slog.Attr) {
	t.mu.Lock()
	first := !t.failing.Load()
	if first {
		t.failing.Store(true)
		t.since, t.failed = t.now(), 0
	}
	t.failed++
	t.mu.Unlock()
	if first {
		attrs = append(attrs, slog.String("err", err.Error()))
		t.log.LogAttrs(context.Background(), slog.LevelWarn, t.what+" unavailable; failures are counted until it recovers", attrs...)
	}
}

// OK records a successful call. The first success after failures is
// logged with how many calls failed and for how long.
func (t *Tracker) OK() {
	if !t.failing.Load() {
		return
	}
	t.mu.Lock()
	if !t.failing.Load() {
		t.mu.Unlock()
		return
	}
	t.failing.Store(false)
	n, d := t.failed, t.now().Sub(t.since)
	t.mu.Unlock()
	t.log.LogAttrs(context.Background(), slog.LevelInfo, t.what+" available again",
		slog.Int64("failed_calls", n), slog.Duration("down_for", d.Round(time.Millisecond)))
}

// Failing reports whether the last call failed.
func (t *Tracker) Failing() bool { return t.failing.Load() }
