package dispatch

import (
	"errors"
	"fmt"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// A hello naming more held leases than one executor may hold is refused
// before any of them is looked up (each is a store read, perhaps a
// commit); a hello claiming more credits than that is given only that many.
func TestHelloIsBounded(t *testing.T) {
	rep, stop := oneReplica(t, Config{})
	defer stop()
	held := make([]*tollgatev1.LeaseRef, limits.MaxExecutorLeases+1)
	for i := range held {
		held[i] = &tollgatev1.LeaseRef{LeaseId: fmt.Sprintf("r_x/s%d/1", i), Fence: 1}
	}
	fs := newFakeStream("edge-1")
	fs.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Hello{Hello: &tollgatev1.Hello{ExecutorId: "edge-1", HeldLeases: held}}}
	res := make(chan error, 1)
	go func() { res <- rep.d.Connect(fs) }()
	select {
	case err := <-res:
		if !errors.Is(err, errkind.Invalid) {
			t.Fatalf("a hello holding %d leases: %v, want refused as invalid", len(held), err)
		}
	case m := <-fs.out:
		go func() { // the cancels it queued for those leases
			for range fs.out {
			}
		}()
		fs.closeSend()
		<-res
		t.Fatalf("a hello holding %d leases was served: %v", len(held), m)
	}

	_, end := rep.connectAs(t, "edge-2", 1<<31)
	defer end()
	rep.d.mu.Lock()
	defer rep.d.mu.Unlock()
	for s := range rep.d.sessions {
		if s.credits > limits.MaxExecutorLeases {
			t.Fatalf("a hello claiming %d credits was given %d", 1<<31, s.credits)
		}
	}
}
