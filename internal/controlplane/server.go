package controlplane

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Limits every server applies.
const (
	MaxRecvMsgSize       = 4 << 20
	MaxSendMsgSize       = 16 << 20
	MaxConcurrentStreams = 1024
	// KeepaliveMinTime is the most often a client may ping; clients must
	// use a longer keepalive time or the server closes the connection.
	KeepaliveMinTime = 10 * time.Second
	// streamWorkers is how many goroutines serve streams and keep their
	// grown stacks between streams; a stream that finds them all busy
	// gets a goroutine of its own.
	streamWorkers = 128
)

// Config wires a control plane's gRPC server.
type Config struct {
	Store      store.Store
	Verifier   *identity.Verifier
	Catalog    *compiler.Catalog
	Skills     Skills
	Roles      map[string][]string
	Dispatcher Dispatcher
	Log        *slog.Logger
	Engine     engine.Config
	Reflection bool
	// SigningKey signs grants for side-effecting leases (KeyID names it to
	// executors). With no Dispatcher set, the server serves
	// ExecutorService.Connect and leases steps to connected executors.
	SigningKey ed25519.PrivateKey
	KeyID      string
	LeaseTTL   time.Duration
	// WithoutAsking says who may approve a `without asking` step by
	// starting a run; nil refuses all.
	WithoutAsking func(starter string, step plan.Step) bool
}

// Server is a control plane's gRPC server with its handlers.
type Server struct {
	GRPC   *grpc.Server
	Runner *Runner
	health *health.Server
	log    *slog.Logger
	execs  *ExecDispatcher
}

// healthMethods skip authentication so load balancers can probe.
var healthMethods = []string{"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch", "/grpc.health.v1.Health/List"}

// NewServer builds the server: authentication on every unary and
// streaming RPC (except health), error mapping and logging in one place,
// message size and stream limits, keepalive enforcement.
func NewServer(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var execs *ExecDispatcher
	if cfg.Dispatcher == nil {
		execs = NewExecDispatcher(DispatcherConfig{Log: cfg.Log, SigningKey: cfg.SigningKey, KeyID: cfg.KeyID, LeaseTTL: cfg.LeaseTTL})
		cfg.Dispatcher = execs
	}
	runner := NewRunner(RunnerConfig{Store: cfg.Store, Dispatcher: cfg.Dispatcher, Log: cfg.Log, Engine: cfg.Engine})
	skip := identity.InterceptorOptions{SkipMethods: healthMethods}
	gs := grpc.NewServer(
		grpc.ChainUnaryInterceptor(unaryErrors(cfg.Log), identity.UnaryServerInterceptor(cfg.Verifier, skip)),
		grpc.ChainStreamInterceptor(streamErrors(cfg.Log), identity.StreamServerInterceptor(cfg.Verifier, skip)),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxSendMsgSize(MaxSendMsgSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		// Streams run on goroutines that outlive one stream, so a handler's
		// deep call path does not grow a fresh stack each time (a stream
		// that finds every worker busy gets a goroutine of its own).
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
	)
	cat := cfg.Catalog
	catalog := func() *compiler.Catalog { return cat }
	svc := NewServices(ServiceConfig{Runner: runner, Store: cfg.Store, Catalog: catalog, Skills: cfg.Skills, Roles: cfg.Roles, WithoutAsking: cfg.WithoutAsking})
	tollgatev1.RegisterPlanServiceServer(gs, NewPlanServer(PlanConfig{Catalog: catalog}))
	tollgatev1.RegisterRunServiceServer(gs, svc)
	tollgatev1.RegisterApprovalServiceServer(gs, svc)
	tollgatev1.RegisterAuditServiceServer(gs, svc)
	if execs != nil {
		execs.runner = runner
		tollgatev1.RegisterExecutorServiceServer(gs, execs)
	}
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	if cfg.Reflection {
		reflection.Register(gs)
	}
	return &Server{GRPC: gs, Runner: runner, health: hs, log: cfg.Log, execs: execs}
}

// Serve serves on lis until Shutdown. It blocks.
func (s *Server) Serve(lis net.Listener) error {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	return s.GRPC.Serve(lis)
}

// Shutdown reports NOT_SERVING, then drains in-flight RPCs until ctx ends,
// then stops hard.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.GRPC.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("drain deadline passed; stopping hard")
		s.GRPC.Stop()
		<-done
	}
	if s.execs != nil {
		s.execs.closeOnce.Do(s.execs.Close)
	}
}
