// Package memlimit sets the Go runtime's garbage-collector target and
// soft memory limit of `surgepay serve` (gc_percent, memory_limit_mib).
package memlimit

import (
	"log/slog"
	"math"
	"runtime/debug"
)

// Apply sets the garbage collector's target (gc_percent)
// and the soft memory limit (memory_limit_mib) of serve, except those the
// environment sets: the Go runtime reads GOGC and GOMEMLIMIT at start,
// and they win, as for any Go program. It logs what is in force and
// returns a function that puts back the previous settings, for serve run
// inside a test process.
func Apply(gcPercent, memoryLimitMiB int, env func(string) string, log *slog.Logger) (restore func()) {
	gogc, limit := any(gcPercent), any(memoryLimitMiB)
	var undo []func()
	if v := env("GOGC"); v != "" {
		gogc = "GOGC=" + v
	} else {
		prev := debug.SetGCPercent(gcPercent)
		undo = append(undo, func() { debug.SetGCPercent(prev) })
	}
	if v := env("GOMEMLIMIT"); v != "" {
		limit = "GOMEMLIMIT=" + v
	} else {
		prev := debug.SetMemoryLimit(memoryLimitBytes(memoryLimitMiB))
		undo = append(undo, func() { debug.SetMemoryLimit(prev) })
	}
	log.Info("garbage collector", "gc_percent", gogc, "memory_limit_mib", limit)
	return func() {
		for _, f := range undo {
			f()
		}
	}
}

// memoryLimitBytes turns memory_limit_mib into debug.SetMemoryLimit's
// argument, where no limit is math.MaxInt64 rather than 0.
func memoryLimitBytes(mib int) int64 {
	if mib == 0 {
		return math.MaxInt64
	}
	return int64(mib) << 20
}
