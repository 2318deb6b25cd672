package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"go.uber.org/goleak"
)

// New starts nothing; Run owns the workers and the expiry pass, and when
// its context ends it returns only once they have stopped, the handlers
// that overflowed the workers included.
func TestRunOwnsEveryGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	d := New(Config{LeaseTTL: 40 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx, nil) }()
	release := make(chan struct{})
	ran := make(chan struct{}, recordWorkers+8)
	for range recordWorkers + 8 { // more than the workers: some overflow
		d.handle(func() { ran <- struct{}{}; <-release })
	}
	for range recordWorkers + 8 {
		<-ran
	}
	cancel()
	<-d.stop // Run has begun to stop; its handlers still hold
	select {
	case <-done:
		t.Fatal("Run returned while its handlers still ran")
	default:
	}
	close(release)
	<-done
	// After Run, a handler runs on its caller's goroutine: nobody would
	// own one started now.
	ranInline := false
	d.handle(func() { ranInline = true })
	if !ranInline {
		t.Fatal("a handler after Run did not run on the caller's goroutine")
	}
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
