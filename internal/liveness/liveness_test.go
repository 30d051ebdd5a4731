package liveness

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

var errTest = errors.New("test: down")

// TestWatch: going down cancels the contexts in flight with the cause and
// those taken while down, once; coming back gives live contexts again;
// each change of state is told once.
func TestWatch(t *testing.T) {
	var downs, ups atomic.Int32
	w := New(errTest, func(error) { downs.Add(1) }, func() { ups.Add(1) })
	inFlight, done := w.Bound(context.Background())
	defer done()
	if w.Down() || inFlight.Err() != nil {
		t.Fatal("a new Watch is down, or its context ended")
	}
	if !w.MarkDown(errors.New("probe")) || w.MarkDown(errors.New("probe")) {
		t.Error("MarkDown twice: want a change the first time only")
	}
	select {
	case <-inFlight.Done():
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the context in flight not cancelled 30 s after the Watch went down")
	}
	if !errors.Is(context.Cause(inFlight), errTest) {
		t.Errorf("the context in flight: cause %v, want the Watch's", context.Cause(inFlight))
	}
	late, done2 := w.Bound(context.Background())
	defer done2()
	if !w.Down() || late.Err() == nil {
		t.Error("down: a context taken now is live")
	}
	if !w.MarkUp() || w.MarkUp() {
		t.Error("MarkUp twice: want a change the first time only")
	}
	fresh, done3 := w.Bound(context.Background())
	defer done3()
	if w.Down() || fresh.Err() != nil {
		t.Error("up again: a context taken now has ended")
	}
	if downs.Load() != 1 || ups.Load() != 1 {
		t.Errorf("told down %d, up %d times; want once each", downs.Load(), ups.Load())
	}
}

// TestRun: a probe that fails marks the Watch down, one that succeeds
// marks it up, until Run's context ends.
func TestRun(t *testing.T) {
	w := New(errTest, nil, nil)
	var failing atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.Run(ctx, 40*time.Millisecond, func(context.Context) error {
			if failing.Load() {
				return errTest
			}
			return nil
		})
	}()
	wait := func(down bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); w.Down() != down; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) { // a hang guard
				t.Fatalf("Down() still %v 30 s after the probe changed", !down)
			}
		}
	}
	failing.Store(true)
	wait(true)
	failing.Store(false)
	wait(false)
	cancel()
	<-ended
}
