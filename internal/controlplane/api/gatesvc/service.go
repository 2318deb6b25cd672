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
