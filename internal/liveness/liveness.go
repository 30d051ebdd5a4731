// Package liveness finds a dependency that hangs. A server that is stopped
// or frozen, or a network that drops packets, keeps its connections open
// and answers nothing: no error comes, a call waits for as long as the
// operating system keeps the connection (minutes), and neither a pool nor
// a breaker (which needs failures) notices. A Watch probes the dependency
// every HungAfter/4 and takes it as down when a probe is not answered
// within the rest of HungAfter, so a hang is known within HungAfter of its
// start. While it is down, calls are refused at once (Down), and the calls
// in flight when it went down are cancelled (Bound's context); the first
// probe answered marks it up again.
package liveness

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Watch is one dependency's verdict. Safe for concurrent use; Down and
// Bound cost an atomic load (and Bound a child context) while it is up.
type Watch struct {
	cause  error // the cause of the contexts Bound cancels
	onDown func(err error)
	onUp   func()

	down atomic.Bool
	mu   sync.Mutex // serializes the changes of state
	// era is cancelled with cause when the dependency goes down, and
	// replaced when it comes back: Bound's contexts are its children.
	era atomic.Pointer[era]
}

type era struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newEra() *era {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &era{ctx: ctx, cancel: cancel}
}

// New returns a Watch, up. cause is the cause of the contexts Bound
// cancels when it goes down; onDown (with the failed probe's error) and
// onUp, if set, are called on each change of state, one at a time.
func New(cause error, onDown func(err error), onUp func()) *Watch {
	w := &Watch{cause: cause, onDown: onDown, onUp: onUp}
	w.era.Store(newEra())
	return w
}

// Down reports whether the last probe failed.
func (w *Watch) Down() bool { return w.down.Load() }

// Bound returns a context under ctx that is also cancelled, with the
// Watch's cause, when the dependency goes down (at once, in a goroutine
// of its own), and the func that releases it. A Bound taken while down is
// cancelled already.
func (w *Watch) Bound(ctx context.Context) (context.Context, func()) {
	parent := w.era.Load().ctx
	c, cancel := context.WithCancelCause(ctx)
	if parent.Err() != nil {
		cancel(context.Cause(parent))
		return c, func() {}
	}
	stop := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	return c, func() { stop(); cancel(nil) }
}

// MarkDown takes the dependency as down: the contexts of Bound are
// cancelled. It reports whether the state changed.
func (w *Watch) MarkDown(err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down.Load() {
		return false
	}
	w.down.Store(true)
	w.era.Load().cancel(w.cause)
	if w.onDown != nil {
		w.onDown(err)
	}
	return true
}

// MarkUp takes the dependency as up again. It reports whether the state
// changed.
func (w *Watch) MarkUp() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.down.Load() {
		return false
	}
	w.era.Store(newEra())
	w.down.Store(false)
	if w.onUp != nil {
		w.onUp()
	}
	return true
}

// Run calls probe every hungAfter/4 with a context that ends after the
// rest of hungAfter, and marks the dependency down when it fails and up
// when it succeeds, until ctx ends.
func (w *Watch) Run(ctx context.Context, hungAfter time.Duration, probe func(context.Context) error) {
	interval := hungAfter / 4
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, hungAfter-interval)
		err := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.MarkDown(err)
		} else {
			w.MarkUp()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
