package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v, want nil", err)
	}
	stop := errors.New("stopped")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(stop)
	if err := Sleep(ctx, 0); err != nil {
		t.Errorf("Sleep(ended context, 0) = %v, want nil", err)
	}
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, time.Hour) }()
	select {
	case err := <-done:
		if !errors.Is(err, stop) {
			t.Errorf("Sleep(ended context, 1h) = %v, want the context's cause", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep(ended context, 1h) did not return")
	}
}
