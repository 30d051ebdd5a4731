//go:build !unix

package main

import "testing"

// sendHUP skips the test: a process cannot send itself SIGHUP here (no
// kill(2)); the file-change reload still works.
func sendHUP(t *testing.T) {
	t.Helper()
	t.Skip("no SIGHUP to send on this OS")
}
