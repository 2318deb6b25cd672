//go:build faults

package faults

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// armedPoint is one armed point and its hits so far.
type armedPoint struct {
	arm  Arm
	hits atomic.Int64
}

// armed is the armed set: built at init from EnvVar, replaced only by
// the package's own tests (arm). The map is never changed once stored.
// This, and init, is the package-level state doc.go speaks of; it exists
// only in a build with the faults tag.
var armed atomic.Pointer[map[Point]*armedPoint]

func init() {
	set, err := Parse(os.Getenv(EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tollgate-faults: %v\n", err)
		os.Exit(2)
	}
	store(set)
}

// arm replaces the armed set with spec's, its hits at zero (tests).
func arm(spec string) error {
	set, err := Parse(spec)
	if err != nil {
		return err
	}
	store(set)
	return nil
}

func store(set map[Point]Arm) {
	m := make(map[Point]*armedPoint, len(set))
	for p, a := range set {
		m[p] = &armedPoint{arm: a}
	}
	armed.Store(&m)
}

// At is the crash point p: when p is armed and this is the hit its action
// fires on, it writes "tollgate-faults: <point> <action>" to stderr and
// then acts: kill sends SIGKILL to this process and never returns, pause
// sleeps and returns nil, fail returns an error wrapping ErrInjected. Any
// other hit returns nil.
func At(p Point) error {
	a := (*armed.Load())[p]
	if a == nil || a.hits.Add(1) != int64(a.arm.Hit) {
		return nil
	}
	switch a.arm.Action {
	case Kill:
		say(p, "kill")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		os.Exit(128 + int(syscall.SIGKILL)) // not reached: the signal is delivered before kill returns
	case Pause:
		say(p, "pause "+a.arm.Pause.String())
		time.Sleep(a.arm.Pause)
	case Fail:
		say(p, "fail")
		return fmt.Errorf("%w at %s", ErrInjected, p)
	}
	return nil
}

// say writes one line to stderr, in one write.
func say(p Point, what string) {
	os.Stderr.WriteString("tollgate-faults: " + string(p) + " " + what + "\n")
}
