// Package gatesvc serves tollgate.v1.GateService: gates from code. A
// script's run is an external run; its gates are asks like any other,
// decided under gate.NAME, and an approved gate yields a signed grant.
//
// Invariants it enforces, and where:
//   - I1: a script's side effect waits on its gate's grant (gates.go,
//     gateGrant); the grant is signed only for an approved gate.
//   - I9: a gate opens only where policy covers gate.NAME, and --action
//     only raises the bar (approvals.Desk.RouteGate); visibility through
//     api.Readers.
package gatesvc

import (
	"crypto/ed25519"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/wire"
)

// Config is what the GateService needs.
type Config struct {
	Runner    *runner.Runner
	Approvals *approvals.Desk
	Readers   api.Readers
	Views     *wire.Views
	// SigningKey and KeyID sign the grant an approved gate yields (the
	// key that signs executors' grants); GateGrantTTL is how long such a
	// grant stays valid after the approval (default DefaultGateGrantTTL).
	SigningKey   ed25519.PrivateKey
	KeyID        string
	GateGrantTTL time.Duration
	Log          *slog.Logger
}

// Service implements tollgatev1.GateServiceServer.
type Service struct {
	tollgatev1.UnimplementedGateServiceServer
	cfg Config
}

var _ tollgatev1.GateServiceServer = (*Service)(nil)

// New returns the GateService.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.GateGrantTTL <= 0 {
		cfg.GateGrantTTL = DefaultGateGrantTTL
	}
	return &Service{cfg: cfg}
}

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterGateServiceServer(gs, s) }
