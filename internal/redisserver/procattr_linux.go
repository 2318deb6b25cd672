package redisserver

import "syscall"

// procAttr makes the kernel kill the server if the process that started it dies
// without stopping it.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
