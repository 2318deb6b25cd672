package dispatch

import (
	"errors"
	"strings"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// Close may be called more than once (the server closes the dispatcher
// after shutdown whatever happened before).
func TestCloseIsIdempotent(t *testing.T) {
	d := New(Config{})
	d.Close()
	d.Close()
}

// A lease larger than the message limit is undeliverable: its step fails
// instead of breaking the stream every lease shares.
func TestLeaseFitsRefusesAnOversizedLease(t *testing.T) {
	small := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: &tollgatev1.Lease{ArgsJson: "{}"}}}
	if err := leaseFits(small); err != nil {
		t.Fatalf("a small lease: %v", err)
	}
	big := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: &tollgatev1.Lease{ArgsJson: strings.Repeat("x", limits.MaxMessageBytes)}}}
	if err := leaseFits(big); !errors.Is(err, errkind.Undeliverable) {
		t.Fatalf("an oversized lease: %v, want errkind.Undeliverable", err)
	}
}
