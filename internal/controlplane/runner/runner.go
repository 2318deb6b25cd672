package runner

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/ids"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// Runner is the one road (I2): every entry point — API, CLI, retries,
// resumes — moves runs through it, and it moves them only through the
// engine, committing each transition atomically before acting on it.
type Runner struct {
	runnerPerf
	store    store.Store
	dispatch Dispatcher
	log      *slog.Logger
	engine   engine.Config
	newID    func() string

	mu       sync.Mutex
	machines *lru.Cache[string, *engine.Machine] // by plan digest; plans are immutable
	watchers map[string]map[*RunWatch]bool
	queues   map[string]*runQueue
	cache    *lru.Cache[string, cachedRun] // runs this replica committed last; under mu with ended
	offset   atomic.Int64                  // store clock minus ours, nanoseconds
	expiries atomic.Int64

	// asks hears of every ask this replica opens, after its commit.
	asks AskHook
	// settling are the runs whose ask hooks run now (settling.go).
	settling settling
	// outbox is the work each commit enqueues for its effects (notices).
	outbox Outbox
	// observers hear of every transition this replica commits.
	observers []Observer
	// unsure are runs whose last commit failed with an unknown outcome.
	unsure runSet
	// awaiting are runs whose in-flight leases another live replica holds.
	awaiting runSet
	// replica is this replica's name, which its leases record.
	replica string
	// handoff are steps this replica claimed in their own commit.
	handoff handoffs
	// served is what live replicas serve (Announce).
	served servedQueues
	// born is when this Runner was made; grace is how long after it a
	// lease recorded under this replica's name, not held here, may still
	// be re-attached by its executor (Config.LeaseTTL).
	born  time.Time
	grace time.Duration
}

// runnerPerf is what a Runner keeps to save store round trips.
type runnerPerf struct {
	ended    *lru.Cache[string, cachedRun] // ended runs, for readers; under Runner.mu
	offsetAt atomic.Int64                  // when offset was measured, our clock, Unix ns; 0 never
	// refreshing is set while one caller measures a stale offset again.
	refreshing atomic.Bool
	// paged are runs decoded for readers of pages that this replica did not
	// commit (readRuns): each is good for the version it holds.
	paged *lru.Cache[string, cachedRun]
}

// Config configures a Runner.
type Config struct {
	Store      store.Store
	Dispatcher Dispatcher // nil means NoExecutors
	Log        *slog.Logger
	Engine     engine.Config
	NewID      func() string // nil means random ids
	Observers  []Observer    // traces, metrics
	// Replica names this replica (the leases it hands out record it);
	// Recover and Takeover leave leases of a live replica alone.
	Replica string
	// Asks hears of every ask this replica opens, notices and closes,
	// after the commit; nil: nobody.
	Asks AskHook
	// Outbox gives the work each commit enqueues for its effects, in the
	// same commit (notices); nil: none.
	Outbox Outbox
	// LeaseTTL is the executors' lease TTL: after a restart under the same
	// replica name, leases recorded under it are left to their executors
	// for this long (default 10s).
	LeaseTTL time.Duration
	// PlanCache bounds the plans (engines) kept in memory, least recently
	// used evicted; an evicted plan is loaded from the store again when a
	// run of it moves. 0 means DefaultPlanCache.
	PlanCache int
}

// DefaultPlanCache is how many plans a replica keeps in each of its plan
// caches (engines, compilations, plan views) unless configured.
const DefaultPlanCache = 256

// New returns a Runner.
func New(cfg Config) *Runner {
	if cfg.Dispatcher == nil {
		cfg.Dispatcher = NoExecutors{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.NewID == nil {
		cfg.NewID = ids.Run
	}
	if cfg.PlanCache <= 0 {
		cfg.PlanCache = DefaultPlanCache
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	return &Runner{store: cfg.Store, dispatch: cfg.Dispatcher, log: cfg.Log, engine: cfg.Engine, newID: cfg.NewID, observers: cfg.Observers, asks: cfg.Asks, outbox: cfg.Outbox, replica: cfg.Replica, born: time.Now(), grace: cfg.LeaseTTL,
		machines: lru.New[string, *engine.Machine](cfg.PlanCache), watchers: map[string]map[*RunWatch]bool{}, queues: map[string]*runQueue{}, cache: lru.NewWeighted(maxCachedRuns, maxCachedRunBytes, runCost),
		runnerPerf: runnerPerf{ended: lru.NewWeighted(maxEndedRuns, maxEndedRunBytes, runCost), paged: lru.NewWeighted(maxReadRuns, maxReadRunBytes, runCost)}}
}

// Caches reports the figures of the Runner's bounded caches by name, for
// metrics: engines by plan ("plans"), decoded runs ("runs"), ended
// runs kept for readers ("ended_runs") and runs decoded for readers of
// pages ("read_runs").
func (r *Runner) Caches() map[string]lru.Stats {
	return map[string]lru.Stats{"plans": r.machines.Stats(), "runs": r.cache.Stats(), "ended_runs": r.ended.Stats(), "read_runs": r.paged.Stats()}
}
