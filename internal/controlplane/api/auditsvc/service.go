package auditsvc

import (
	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
)

// Config is what the AuditService needs.
type Config struct {
	Runner  *runner.Runner
	Store   store.Store
	Readers api.Readers
}

// Service implements tollgatev1.AuditServiceServer.
type Service struct {
	tollgatev1.UnimplementedAuditServiceServer
	cfg Config
}

var _ tollgatev1.AuditServiceServer = (*Service)(nil)

// New returns the AuditService.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterAuditServiceServer(gs, s) }
