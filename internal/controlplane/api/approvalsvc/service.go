package approvalsvc

import (
	"log/slog"

	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
)

// Config is what the ApprovalService needs.
type Config struct {
	Runner    *runner.Runner
	Store     store.Store
	Approvals *approvals.Desk
	Readers   api.Readers
	Watches   *api.Watches
	Log       *slog.Logger
}

// Service implements tollgatev1.ApprovalServiceServer.
type Service struct {
	tollgatev1.UnimplementedApprovalServiceServer
	cfg Config
}

var _ tollgatev1.ApprovalServiceServer = (*Service)(nil)

// New returns the ApprovalService.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg}
}

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterApprovalServiceServer(gs, s) }
