//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
)

// sendHUP sends this process SIGHUP, which a serve started in it takes
// (signal.Notify) as "reload".
func sendHUP(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
