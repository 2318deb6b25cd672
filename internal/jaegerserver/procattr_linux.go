package jaegerserver

import "syscall"

// procAttr puts Jaeger in a process group of its own (so that Stop can kill
// the group) and makes the kernel kill it if the process that started it dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
