//go:build unix

package redistest

import (
	"os"
	"syscall"
)

// The signals that pause and continue a server.
var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT
