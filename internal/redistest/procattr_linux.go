package redistest

import "syscall"

// procAttr makes the kernel kill the server if the test process dies
// without stopping it.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
