package runsvc

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// Skills finds the saved skill version a run runs (skills.Registry): a
// named version, or the latest (version 0), of a skill not deleted.
type Skills interface {
	Runnable(ctx context.Context, name string, version int64) (store.SkillVersion, error)
}

// Config is what the RunService needs.
type Config struct {
	Runner *runner.Runner
	Store  store.Store
	// Catalog is the tool catalog recipes compile against (executors'
	// hellos make it stricter).
	Catalog   func() *compiler.Catalog
	Skills    Skills
	Approvals *approvals.Desk
	Readers   api.Readers
	Views     *wire.Views
	Watches   *api.Watches
	Log       *slog.Logger
	// PlanCache bounds the compile cache in entries (0:
	// runner.DefaultPlanCache).
	PlanCache int
}

// Service implements tollgatev1.RunServiceServer.
type Service struct {
	tollgatev1.UnimplementedRunServiceServer
	cfg      Config
	compiled *lru.Cache[compileKey, compiler.Result] // plans are immutable once compiled
}

var _ tollgatev1.RunServiceServer = (*Service)(nil)

// New returns the RunService.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PlanCache <= 0 {
		cfg.PlanCache = runner.DefaultPlanCache
	}
	return &Service{cfg: cfg, compiled: lru.NewWeighted(cfg.PlanCache, maxCompiledBytes,
		func(k compileKey, _ compiler.Result) int64 { return int64(len(k.src) + len(k.name) + len(k.inputs)) })}
}

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterRunServiceServer(gs, s) }

// Compiled reports the compile cache, for metrics.
func (s *Service) Compiled() lru.Stats { return s.compiled.Stats() }
