// Package wait holds the one wait every retry loop and pacer needs: a
// sleep that ends early when its context does.
package wait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends. It returns nil once d has passed (at
// once if d ≤ 0, whatever ctx) and ctx's cause if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
