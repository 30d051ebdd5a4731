//go:build !linux

package sqlite

import "time"

// threadCPU is -1 where the thread's CPU time is not read (outside Linux:
// no thread ID to tell that the writer stayed on one thread).
func threadCPU() (tid int, cpu time.Duration) { return 0, -1 }
