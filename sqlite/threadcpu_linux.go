//go:build linux

package sqlite

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the calling OS thread's ID and its CPU time (user
// and system), or a CPU time of -1 if the system cannot tell. The
// writer's goroutine is not locked to a thread (a locked goroutine costs
// two thread switches at each wake, and its waits for a core grew by a
// third under load: bench/RESULTS.md, session 15), so a CPU time is the
// writer's only between two reads on the same thread (commitTx).
func threadCPU() (tid int, cpu time.Duration) {
	var ts unix.Timespec
	tid = unix.Gettid()
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return tid, -1
	}
	return tid, time.Duration(ts.Nano())
}
