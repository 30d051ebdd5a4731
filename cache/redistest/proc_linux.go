package redistest

import "syscall"

// procAttr has the kernel kill redis-server when the test binary dies.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
