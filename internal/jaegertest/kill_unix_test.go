//go:build unix

package jaegertest

import (
	"errors"
	"syscall"
)

// gone reports whether no process has the id pid (it has exited and been
// reaped).
func gone(pid int) (bool, error) {
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH), err
}
