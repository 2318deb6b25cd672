package plansvc

import (
	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// Config is what the PlanService needs.
type Config struct {
	// Catalog is the server's tool catalog: the union of what connected
	// executors advertise and any catalog files. Compile uses it unless a
	// request brings its own.
	Catalog func() *compiler.Catalog
}

// Service implements tollgatev1.PlanServiceServer.
type Service struct {
	tollgatev1.UnimplementedPlanServiceServer
	cfg Config
}

var _ tollgatev1.PlanServiceServer = (*Service)(nil)

// New returns the PlanService.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterPlanServiceServer(gs, s) }
