//go:build !unix

package mailpittest

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) { _ = p.Kill() }
