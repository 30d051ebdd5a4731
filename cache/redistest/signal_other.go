//go:build !unix

package redistest

import "os"

// No signal pauses a process here: Pause skips its test.
var sigStop, sigCont os.Signal
