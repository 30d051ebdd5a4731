//go:build !unix

package sqlite

import "time"

// threadCPU is -1 where the thread's CPU time is not read.
func threadCPU() time.Duration { return -1 }
