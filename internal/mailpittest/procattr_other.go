//go:build unix && !linux

package mailpittest

import "syscall"

// procAttr puts Mailpit in a process group of its own, so that Stop can
// kill the group.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
