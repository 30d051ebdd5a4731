//go:build !unix

package sqlite

import "time"

// threadCPU is -1 where the thread's CPU time is not read.
func threadCPU() (tid int, cpu time.Duration) { return 0, -1 }
