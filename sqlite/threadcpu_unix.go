//go:build unix

package sqlite

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time (user and system) of the calling OS
// thread, or -1 if the system cannot tell. The writer's goroutine is
// locked to its thread (commitBatch), so this is the writer's CPU.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return -1
	}
	return time.Duration(ts.Nano())
}
