package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/approvalsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/auditsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/gatesvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/plansvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/schedulesvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/skillsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/dispatch"
	"github.com/tollgate-dev/tollgate/internal/controlplane/ids"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/controlplane/schedules"
	"github.com/tollgate-dev/tollgate/internal/controlplane/skills"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/runtrace"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/lru"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Limits every server applies. Messages are bounded by the one limit
// every Tollgate sender and receiver shares, limits.MaxMessageBytes, in
// both directions: a server that sent more than its clients take would
// break their streams instead of failing one request.
const (
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
	Store    store.Store
	Verifier *identity.Verifier
	Catalog  *compiler.Catalog // with the built-in dispatcher, executors' hellos make it stricter (dispatch/toolviews.go)
	// SkillsDir, when set, is loaded into the skill registry before the
	// server serves and again every SkillsDirEvery (0: 2s), through the
	// one publication path (skills.Dir); SkillsDirName names it in
	// messages. --dev loads the example skills this way.
	SkillsDir      fs.FS
	SkillsDirName  string
	SkillsDirEvery time.Duration
	// SchedulePoll is the longest the scheduler sleeps between passes
	// (0: 1s): how soon a schedule another replica wrote is seen.
	SchedulePoll time.Duration
	// Policy, Domain, Owners, EscalateTo and Notifier: see
	// approvals.Config. With a Notifier, the server's Deliverer sends the
	// notices the outbox holds (approvals, outbox.go).
	Policy approvals.Policy
	Domain string
	// PolicyFile is the policy's file, named where a refusal says which
	// rows to add ("" when unknown).
	PolicyFile string
	Owners     map[string]string
	EscalateTo string
	Notifier   approvals.Notifier
	Dispatcher runner.Dispatcher
	Log        *slog.Logger
	Engine     engine.Config
	Reflection bool
	// SigningKey signs grants for side-effecting leases (KeyID names it to
	// executors). With no Dispatcher set, the server serves
	// ExecutorService.Connect and leases steps to connected executors.
	SigningKey ed25519.PrivateKey
	KeyID      string
	LeaseTTL   time.Duration
	// GateGrantTTL is how long an approved gate's grant stays valid.
	GateGrantTTL time.Duration
	// ExecutorTLS is the executor listener's TLS config: it must require
	// and verify client certificates ([identity.ServerTLS]). Executors are
	// known by their certificate's URI SAN in TrustDomain (default
	// identity.DefaultTrustDomain); the executor listener serves only
	// ExecutorService and the API listener does not serve it at all, so
	// people's tokens cannot open an executor stream and executors cannot
	// call the approver API.
	ExecutorTLS *tls.Config
	TrustDomain string
	// Observers hear of every committed transition (metrics).
	Observers []runner.Observer
	// Tracing, when enabled, draws every run as a trace (package runtrace) and
	// sets leases' sampled flags; nil: off.
	Tracing *telemetry.Tracing
	// PlanCache bounds each plan cache (engines, compilations, plan
	// views) in entries; 0: DefaultPlanCache.
	PlanCache int
	// SweepEvery is how often the deadline pass runs (runner.Runner.Sweep;
	// 0: never — readers apply deadlines anyway, I4); ResettleEvery how
	// often commits of unknown outcome are settled (0: LeaseTTL/4).
	SweepEvery    time.Duration
	ResettleEvery time.Duration
	// Replica names this replica in the store: its leases record it, and
	// Run renews its heartbeat every LeaseTTL/4 for LeaseTTL; another
	// replica takes its leases over only once the heartbeat lapses (or it
	// drained and left). "": a random name.
	Replica string
	// DrainTimeout bounds the drain when Run stops (0: 10s).
	DrainTimeout time.Duration
	// DrainDelay is how long Run reports NOT_SERVING, still serving,
	// before the drain begins: a load balancer that polls health (a
	// Kubernetes readiness probe) stops sending new calls first.
	DrainDelay time.Duration
	// APITLS, if set, is the API listener's TLS config ([identity.APITLS]);
	// nil: plain TCP (loopback, or TLS ended by a proxy or mesh).
	APITLS *tls.Config
	// Background is more long-lived work Run owns, started with it and
	// stopped after the servers (the policy watch).
	Background []func(context.Context) error
	// MaxWatchesPerCaller bounds one caller's open watch streams (0:
	// api.DefaultMaxWatchesPerCaller); beyond it a watch is refused with
	// RESOURCE_EXHAUSTED.
	MaxWatchesPerCaller int
}

// FlushTraces returns once every committed transition observed so far
// is drawn as spans (handed to the exporter, not yet exported: see
// telemetry.Tracing.Flush). With tracing off it returns at once.
func (s *Server) FlushTraces(ctx context.Context) error {
	if s.tracer == nil {
		return nil
	}
	return s.tracer.Flush(ctx)
}

// Server is a control plane's gRPC server with its handlers.
type Server struct {
	// GRPC serves the API for people and services (bearer tokens).
	GRPC *grpc.Server
	// Executors serves ExecutorService over mTLS; nil when the server
	// has an external Dispatcher.
	Executors *grpc.Server
	Runner    *runner.Runner
	health    *health.Server
	catalog   *atomic.Pointer[compiler.Catalog] // the configured catalog, with no built-in dispatcher
	log       *slog.Logger
	cfg       Config
	execs     *dispatch.Dispatcher
	// tracer draws committed runs as traces on its own goroutine; nil
	// with tracing off.
	tracer  *runtrace.Tracer
	runs    *runsvc.Service
	views   *wire.Views
	watches *api.Watches
	// reconciles are runs another replica committed to while this one
	// holds their leases.
	reconciles *pendingRuns
	// notices sends the outbox's webhook deliveries; nil without a
	// Notifier.
	notices *approvals.Deliverer
	local   api.Local
	packets *approvalsvc.Service
	// scheduler fires schedules' ticks; skillsDir loads Config.SkillsDir
	// (nil without one).
	scheduler *schedules.Scheduler
	skillsDir *skills.Dir
	// desk, readers and catalogOf are what the MCP gateway is built
	// on (MCPGateway).
	desk      *approvals.Desk
	readers   api.Readers
	catalogOf func() *compiler.Catalog
}

// Packet is an ask's decision packet as a notice shows it (no caller: the
// control plane's own notifiers read it; never serve it to a caller).
func (s *Server) Packet(ctx context.Context, askID string) (*tollgatev1.Ask, error) {
	return s.packets.Packet(ctx, askID)
}

// Local is the API as the control plane's own surfaces (the web inbox,
// Slack) call it: the same handlers, limits and errors as the listener.
func (s *Server) Local() api.Local { return s.local }

// pendingRuns is a coalescing set of run ids with a signal.
type pendingRuns struct {
	mu    sync.Mutex
	ids   map[string]bool
	ready chan struct{}
}

func newPendingRuns() *pendingRuns {
	return &pendingRuns{ids: map[string]bool{}, ready: make(chan struct{}, 1)}
}

func (p *pendingRuns) add(id string) {
	p.mu.Lock()
	p.ids[id] = true
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

func (p *pendingRuns) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.ids))
	for id := range p.ids {
		out = append(out, id)
	}
	clear(p.ids)
	return out
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
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = dispatch.DefaultLeaseTTL
	}
	if cfg.ResettleEvery <= 0 {
		// As often as the dispatcher's expiry pass, which ran it before.
		cfg.ResettleEvery = max(cfg.LeaseTTL/4, 100*time.Millisecond)
	}
	if cfg.PlanCache <= 0 {
		cfg.PlanCache = runner.DefaultPlanCache
	}
	if cfg.Replica == "" {
		cfg.Replica = "cp-" + ids.Token()
	}
	var execs *dispatch.Dispatcher
	if cfg.Dispatcher == nil {
		execs = dispatch.New(dispatch.Config{Log: cfg.Log, SigningKey: cfg.SigningKey, KeyID: cfg.KeyID, LeaseTTL: cfg.LeaseTTL, Tracing: cfg.Tracing, Catalog: cfg.Catalog, Replica: cfg.Replica})
		cfg.Dispatcher = execs
	}
	observers := cfg.Observers
	var tracer *runtrace.Tracer
	if cfg.Tracing.Enabled() {
		tracer = runtrace.New(cfg.Tracing)
		observers = append(slices.Clip(observers), tracer)
	}
	// The desk judges decisions for the handlers and hears of asks from
	// the Runner (its AskHook); it needs neither, so it is built first.
	desk := approvals.New(approvals.Config{Policy: cfg.Policy, Domain: cfg.Domain, PolicyFile: cfg.PolicyFile, Owners: cfg.Owners, Store: cfg.Store,
		EscalateTo: cfg.EscalateTo, Notifier: cfg.Notifier, AnswerCommand: wire.AnswerCommand, Work: cfg.Store, Replica: cfg.Replica, Log: cfg.Log})
	// With webhooks, the desk puts notices in each commit (the outbox).
	var outbox runner.Outbox
	if cfg.Notifier != nil {
		outbox = desk
	}
	if cfg.Engine.QuorumFloor == nil && cfg.Policy != nil {
		cfg.Engine.QuorumFloor = desk.QuorumFloor
	}
	cat := &atomic.Pointer[compiler.Catalog]{}
	cat.Store(cfg.Catalog)
	catalog := cat.Load
	if execs != nil {
		// What connected executors advertise makes the catalog stricter
		// (I2): a tool an executor calls side-effecting is gated, and the
		// input schema it advertises is the one args are checked against.
		catalog = execs.Catalog
	}
	if cfg.Engine.CheckArgs == nil {
		cfg.Engine.CheckArgs = func(server, tool string, args plan.Object) error { return catalog().CheckArgs(server, tool, args) }
	}
	if cfg.Engine.Undecidable == nil && cfg.Policy != nil {
		// An ask nobody could decide fails its run as it would open.
		cfg.Engine.Undecidable = desk.Undecidable
	}
	run := runner.New(runner.Config{Store: cfg.Store, Dispatcher: cfg.Dispatcher, Log: cfg.Log, Engine: cfg.Engine, Observers: observers, PlanCache: cfg.PlanCache, Asks: desk, Outbox: outbox, Replica: cfg.Replica, LeaseTTL: cfg.LeaseTTL})
	skip := identity.InterceptorOptions{SkipMethods: healthMethods}
	limits := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(limits.MaxMessageBytes),
		grpc.MaxSendMsgSize(limits.MaxMessageBytes),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		// Streams run on goroutines that outlive one stream, so a handler's
		// deep call path does not grow a fresh stack each time (a stream
		// that finds every worker busy gets a goroutine of its own).
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
	}
	apiOpts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(api.UnaryErrors(cfg.Log), identity.UnaryServerInterceptor(cfg.Verifier, skip), api.ValueLimits()),
		grpc.ChainStreamInterceptor(api.StreamErrors(cfg.Log), identity.StreamServerInterceptor(cfg.Verifier, skip), api.StreamValueLimits()),
	}, limits...)
	if cfg.APITLS != nil {
		apiOpts = append(apiOpts, grpc.Creds(credentials.NewTLS(cfg.APITLS)))
	}
	gs := grpc.NewServer(apiOpts...)
	// What the services share: who may see a run, the plan views runs are
	// drawn with, and the watch streams' limit and events.
	readers := api.Readers{Runner: run, Desk: desk}
	views := wire.NewViews(cfg.PlanCache)
	if execs != nil {
		views.Connected = execs.Connected // a blocked run names what they offer
	}
	watches := api.NewWatches(cfg.MaxWatchesPerCaller, views)
	registry := skills.New(skills.Config{Store: cfg.Store, Catalog: catalog, Authority: desk, Now: cfg.Store.Now, Log: cfg.Log})
	runs := runsvc.New(runsvc.Config{Runner: run, Store: cfg.Store, Catalog: catalog, Skills: registry, Approvals: desk,
		Readers: readers, Views: views, Watches: watches, Log: cfg.Log, PlanCache: cfg.PlanCache})
	runs.Register(gs)
	skillsvc.New(skillsvc.Config{Registry: registry, Catalog: catalog}).Register(gs)
	book := schedules.NewBook(schedules.BookConfig{Store: cfg.Store, Skills: registry, Roles: desk, OperatorRole: api.RoleOperator, AuditorRole: api.RoleAuditor, Now: cfg.Store.Now})
	schedulesvc.New(schedulesvc.Config{Book: book, Now: cfg.Store.Now}).Register(gs)
	approvalSvc := approvalsvc.New(approvalsvc.Config{Runner: run, Store: cfg.Store, Approvals: desk, Readers: readers, Watches: watches, Log: cfg.Log})
	approvalSvc.Register(gs)
	auditsvc.New(auditsvc.Config{Runner: run, Store: cfg.Store, Readers: readers}).Register(gs)
	gatesvc.New(gatesvc.Config{Runner: run, Approvals: desk, Readers: readers, Views: views,
		SigningKey: cfg.SigningKey, KeyID: cfg.KeyID, GateGrantTTL: cfg.GateGrantTTL, Log: cfg.Log}).Register(gs)
	plansvc.New(plansvc.Config{Catalog: catalog}).Register(gs)
	hs := health.NewServer()
	// Not serving until Run serves (health.NewServer starts as SERVING).
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	if cfg.Reflection {
		reflection.Register(gs)
	}
	srv := &Server{GRPC: gs, Runner: run, health: hs, catalog: cat, log: cfg.Log, cfg: cfg, execs: execs, tracer: tracer, runs: runs, views: views, watches: watches, reconciles: newPendingRuns(),
		local: api.Local{Approvals: approvalSvc, Runs: runs, Log: cfg.Log}, packets: approvalSvc, desk: desk, readers: readers, catalogOf: catalog,
		scheduler: schedules.NewScheduler(schedules.SchedulerConfig{Store: cfg.Store, Starter: runs, Runs: run, Replica: cfg.Replica, Poll: cfg.SchedulePoll, Log: cfg.Log})}
	if cfg.SkillsDir != nil {
		every := cfg.SkillsDirEvery
		if every <= 0 {
			every = 2 * time.Second
		}
		srv.skillsDir = skills.NewDir(registry, cfg.SkillsDir, cfg.SkillsDirName, every, cfg.Log)
	}
	if cfg.Notifier != nil {
		srv.notices = approvals.NewDeliverer(approvals.DelivererConfig{Store: cfg.Store, Sender: cfg.Notifier, Recorder: run, Replica: cfg.Replica, Held: desk, Log: cfg.Log})
	}
	if execs != nil {
		td := cfg.TrustDomain
		if td == "" {
			td = identity.DefaultTrustDomain
		}
		// No TLS config is a server nobody can connect to as an
		// executor: every handshake fails. It never falls back to
		// plain TCP.
		tlsCfg := cfg.ExecutorTLS
		if tlsCfg == nil {
			tlsCfg = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
		}
		srv.Executors = grpc.NewServer(append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(tlsCfg)),
			grpc.ChainUnaryInterceptor(api.UnaryErrors(cfg.Log), identity.ExecutorUnaryInterceptor(td)),
			grpc.ChainStreamInterceptor(api.StreamErrors(cfg.Log), identity.ExecutorStreamInterceptor(td)),
		}, limits...)...)
		tollgatev1.RegisterExecutorServiceServer(srv.Executors, execs)
		healthpb.RegisterHealthServer(srv.Executors, hs)
	}
	return srv
}

// discard stops what NewServer started for a server that will never Run:
// its gRPC servers' stream workers.
func (s *Server) discard() {
	s.GRPC.Stop()
	if s.Executors != nil {
		s.Executors.Stop()
	}
}

// Listeners are what a Server serves on: the API (bearer tokens), and
// the executor listener (mTLS, ExecutorService only; nil: none, or a
// server with an external Dispatcher).
type Listeners struct {
	API       net.Listener
	Executors net.Listener
}

// ErrDrainCut is what Run returns when the drain deadline passed and the
// servers were stopped hard: some in-flight RPC or executor stream was cut.
var ErrDrainCut = errors.New("the drain deadline passed; stopped hard")

// Run serves on ls and runs the replica's background work — the
// dispatcher's record workers and expiry pass, the deadline sweep, the
// resettle pass, the notice deliverer, and Config.Background — until ctx
// ends or a listener fails. Then it drains: NOT_SERVING, executors asked
// to finish and report, in-flight RPCs finished within
// Config.DrainTimeout (then cut: ErrDrainCut). The background work runs
// until the servers have stopped, so the last reports are recorded. Run returns once every goroutine it
// started has ended: it is their one owner. Run it once.
func (s *Server) Run(ctx context.Context, ls Listeners) error {
	// Alive before any lease goes out, and gone once drained: another
	// replica then need not wait for the heartbeat to lapse.
	s.heartbeat(ctx)
	defer func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := s.cfg.Store.Leave(lctx, s.cfg.Replica); err != nil {
			s.log.Warn("could not say this replica left; others take its leases when its heartbeat lapses", "replica", s.cfg.Replica, "error", err)
		}
	}()
	if s.skillsDir != nil {
		// Before serving: a run by name right after start finds its skill.
		res, err := s.skillsDir.Load(ctx)
		if err != nil {
			s.discard() // never served: its stream workers stop here
			return err
		}
		s.log.Info("skills loaded", "dir", s.cfg.SkillsDirName, "published", res.Published, "unchanged", len(res.Unchanged), "refused", len(res.Refused))
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var work sync.WaitGroup
	work.Go(func() { _ = s.scheduler.Run(bg) })
	if s.skillsDir != nil {
		work.Go(func() { _ = s.skillsDir.Run(bg) })
	}
	work.Go(func() { _ = tick.Every(bg, s.cfg.LeaseTTL/4, s.heartbeat) })
	work.Go(func() { _ = s.Runner.TakingOver(bg, s.cfg.ResettleEvery) })
	if s.tracer != nil {
		work.Go(func() { _ = s.tracer.Run(bg) })
	}
	// Hints from every replica's commits: work waiting wakes the claimer,
	// notices waiting the deliverer.
	queued, notices := make(chan string, 1024), make(chan struct{}, 1)
	work.Go(func() {
		_ = s.cfg.Store.Hints(bg, func(h store.Hint) {
			switch {
			case h.Queue == approvals.Queue:
				select {
				case notices <- struct{}{}:
				default:
				}
			case h.Queue != "":
				// A full channel drops the hint: the claimer's sweep
				// finds the work.
				select {
				case queued <- h.Queue:
				default:
				}
			}
			if h.Run != "" && h.Origin != s.cfg.Replica {
				s.Runner.Hinted(h.Run)
				if s.execs != nil && s.execs.Holds(h.Run) {
					s.reconciles.add(h.Run)
				}
			}
		})
	})
	if s.execs != nil {
		// Another replica's commit to a run whose steps run here (a
		// cancellation through it): stop what no longer should run.
		reconcileTick := time.NewTicker(s.cfg.ResettleEvery)
		defer reconcileTick.Stop()
		work.Go(func() {
			for {
				select {
				case <-bg.Done():
					return
				case <-s.reconciles.ready:
				case <-reconcileTick.C:
					// A cancel whose hint was lost still stops its step.
					for _, id := range s.execs.HeldRuns() {
						s.reconciles.add(id)
					}
					continue
				}
				for _, id := range s.reconciles.take() {
					s.execs.Reconcile(bg, id)
				}
			}
		})
	}
	if s.execs != nil {
		work.Go(func() { _ = s.execs.Run(bg, s.Runner) })
		wants := func() map[string]int {
			w := s.execs.Wants()
			if w == nil {
				w = map[string]int{}
			}
			w[runner.LeaseQueue] = leaseClaims // every replica looks after leases of replicas gone
			return w
		}
		work.Go(func() { _ = s.Runner.Claiming(bg, claimEvery, wants, queued, s.execs.Capacity()) })
		work.Go(func() {
			for {
				select {
				case <-bg.Done():
					return
				case <-s.execs.Changed():
					s.heartbeat(bg)
				}
			}
		})
	}
	if s.notices != nil {
		work.Go(func() { _ = s.notices.Run(bg, notices) })
	}
	if s.cfg.SweepEvery > 0 {
		work.Go(func() { _ = s.Runner.Sweep(bg, s.cfg.SweepEvery) })
	}
	work.Go(func() { _ = s.Runner.Resettling(bg, s.cfg.ResettleEvery) })
	for _, task := range s.cfg.Background {
		work.Go(func() { _ = task(bg) })
	}

	failed := make(chan error, 2)
	var serving sync.WaitGroup
	serve := func(g *grpc.Server, lis net.Listener) {
		serving.Go(func() {
			if err := g.Serve(lis); err != nil {
				failed <- err
			}
		})
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	serve(s.GRPC, ls.API)
	switch {
	case ls.Executors != nil && s.Executors != nil:
		serve(s.Executors, ls.Executors)
	case ls.Executors != nil:
		ls.Executors.Close() // an external dispatcher: nobody to serve
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	if err == nil && s.cfg.DrainDelay > 0 {
		// Still serving while load balancers see NOT_SERVING and stop
		// sending; the drain's own timeout starts after.
		s.health.Shutdown()
		s.log.Info("NOT_SERVING; draining after the delay", "delay", s.cfg.DrainDelay)
		delay := time.NewTimer(s.cfg.DrainDelay)
		select {
		case <-delay.C:
		case err = <-failed:
			delay.Stop()
		}
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DrainTimeout)
	defer cancel()
	if !s.drain(drain) && err == nil {
		err = ErrDrainCut
	}
	serving.Wait()
	stopBG()
	work.Wait()
	return err
}

// Ready is nil while the API serves, else why not: not yet serving, or
// draining (NOT_SERVING on the gRPC health service). The admin listener's
// /readyz says the same over HTTP, for probes that cannot speak gRPC over
// TLS (a Kubernetes kubelet).
func (s *Server) Ready() error {
	r, err := s.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if st := r.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("gRPC health is %s (starting, or draining)", st)
	}
	return nil
}

// SetCatalog puts a reloaded tool catalog in place of the configured one:
// recipes compile against it from now on (executors' advertised views
// still make it stricter), and a step of an earlier plan that took a tool
// as read-only which it calls side-effecting is refused rather than run
// without a grant. It reports whether what recipes compile against changed.
func (s *Server) SetCatalog(c *compiler.Catalog) bool {
	if s.execs != nil {
		return s.execs.SetCatalog(c)
	}
	return s.catalog.Swap(c) != c
}

// ExecutorsConnected is how many executor streams this replica serves.
func (s *Server) ExecutorsConnected() int {
	if s.execs == nil {
		return 0
	}
	return len(s.execs.Connected())
}

// leaseClaims bounds the in-flight entries of replicas gone one claim
// takes.
const leaseClaims = 64

// claimEvery is how often a replica looks for waiting work with no hint:
// a lost hint costs at most this much latency.
const claimEvery = time.Second

// heartbeat renews this replica's liveness for a lease TTL, and announces
// the queues its executors serve (which decides, on every replica,
// whether a step nobody serves is blocked).
func (s *Server) heartbeat(ctx context.Context) {
	if err := s.cfg.Store.Heartbeat(ctx, s.cfg.Replica, s.cfg.LeaseTTL); err != nil && ctx.Err() == nil {
		s.log.Warn("replica heartbeat not recorded", "replica", s.cfg.Replica, "error", err)
	}
	var queues []string
	if s.execs != nil {
		queues = s.execs.Queues()
	}
	if err := s.Runner.Announce(ctx, queues, s.cfg.LeaseTTL); err != nil && ctx.Err() == nil {
		s.log.Warn("replica's queues not announced", "replica", s.cfg.Replica, "error", err)
	}
}

// drain reports NOT_SERVING, asks executors to finish, then drains
// in-flight RPCs until ctx ends, then stops hard; false if it had to.
func (s *Server) drain(ctx context.Context) bool {
	s.health.Shutdown()
	servers := []*grpc.Server{s.GRPC}
	if s.Executors != nil {
		servers = append(servers, s.Executors)
		deadline, _ := ctx.Deadline()
		// Executors finish a little before the hard stop, so their
		// reports still arrive.
		s.execs.Drain(time.Now().Add(time.Until(deadline) * 4 / 5))
	}
	var stopping sync.WaitGroup
	for _, g := range servers {
		stopping.Go(g.GracefulStop)
	}
	stopped := make(chan struct{})
	go func() { stopping.Wait(); close(stopped) }()
	select {
	case <-stopped:
		return true
	case <-ctx.Done():
		s.log.Warn("drain deadline passed; stopping hard")
		for _, g := range servers {
			g.Stop()
		}
		<-stopped
		return false
	}
}

// Caches reports the figures of the server's bounded caches by name, for
// metrics: engines by plan ("plans"), compilations ("compiled"), plan
// views ("plan_views"), decoded runs ("runs", "ended_runs") and watch
// events ("watch_events").
func (s *Server) Caches() map[string]lru.Stats {
	out := s.Runner.Caches()
	out["compiled"], out["plan_views"], out["watch_events"] = s.runs.Compiled(), s.views.Stats(), s.watches.EventCache()
	return out
}

// Watches reports the open watch streams and those refused, for metrics.
func (s *Server) Watches() api.WatchStats { return s.watches.Stats() }

// WatchFigures is Watches as metrics.Bounds reads it.
func (s *Server) WatchFigures() (active int, refused int64) {
	w := s.Watches()
	return w.Active, w.Refused
}

// TracesDropped is how many sampled transitions the tracer did not draw
// (its queue was full), for metrics; 0 with tracing off.
func (s *Server) TracesDropped() uint64 {
	if s.tracer == nil {
		return 0
	}
	return s.tracer.Dropped()
}

var _ metrics.Bounds = (*Server)(nil)
