//go:build unix

package stripe_test

import "syscall"

// tcpNoDelay reads TCP_NODELAY of the socket fd.
func tcpNoDelay(fd uintptr) (int, error) {
	return syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
}
