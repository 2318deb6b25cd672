//go:build !linux

package redisserver

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
