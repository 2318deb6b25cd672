package mailpittest

import "syscall"

// procAttr puts Mailpit in a process group of its own (so that Stop can
// kill the group) and makes the kernel kill it if the test process dies
// first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
