package e2e

import (
	"context"
	"crypto/ed25519"
	"testing"

	"go.uber.org/goleak"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// 1,000 executor connect/disconnect cycles against a real control plane
// leave no goroutine behind, on either side.
func TestConnectDisconnectCyclesLeakNothing(t *testing.T) {
	// Not in parallel: goleak sees every goroutine of the process,
	// other tests\' too.
	before := goleak.IgnoreCurrent()
	// Cleanups run last-in first-out: this one, registered first, runs after
	// the world's (server shutdown, connections).
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	func() {
		w := newWorld(t, "")
		conn := w.execConn(t, "cycler")
		client := tollgatev1.NewExecutorServiceClient(conn)
		cycles := 1000
		if testing.Short() {
			cycles = 100
		}
		for i := range cycles {
			ctx, cancel := context.WithCancel(context.Background())
			connected := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- executor.Run(ctx, executor.Config{ID: "cycler", Host: w.tools, Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"cp": w.gpub}),
					Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
						s, err := client.Connect(ctx)
						if err == nil {
							select {
							case <-connected:
							default:
								close(connected)
							}
						}
						return s, err
					}})
			}()
			<-connected
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
		}
	}()
}
