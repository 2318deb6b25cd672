//go:build unix && !linux

package jaegerserver

import "syscall"

// procAttr puts Jaeger in a process group of its own, so that Stop can kill
// the group.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
