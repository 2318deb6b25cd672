package api

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// WatchPoll is how often a watcher re-reads what it watches to see
// commits made by other replicas.
const WatchPoll = time.Second

// DefaultMaxWatchesPerCaller is how many watch streams (WatchRun and
// WatchAsks together) one caller may hold open at once unless configured.
const DefaultMaxWatchesPerCaller = 64

// watchLimit counts the open watch streams of each caller.
type watchLimit struct {
	max     int
	mu      sync.Mutex
	open    map[string]int
	active  int
	refused atomic.Int64
}

func newWatchLimit(max int) *watchLimit {
	if max <= 0 {
		max = DefaultMaxWatchesPerCaller
	}
	return &watchLimit{max: max, open: map[string]int{}}
}

// acquire takes one of the caller's watch slots, or refuses with
// RESOURCE_EXHAUSTED when they hold them all; release gives it back.
func (l *watchLimit) acquire(who string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[who] >= l.max {
		l.refused.Add(1)
		return nil, fmt.Errorf("%s already holds %d watch streams, the most one caller may: close one first: %w", who, l.max, errkind.Exhausted)
	}
	l.open[who]++
	l.active++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[who]--; l.open[who] <= 0 {
				delete(l.open, who)
			}
			l.active--
		})
	}, nil
}

// WatchStats is what the watch limit reports to metrics.
type WatchStats struct {
	Active  int   // watch streams open now
	Refused int64 // watches refused since start: the caller held its limit
}

func (l *watchLimit) stats() WatchStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return WatchStats{Active: l.active, Refused: l.refused.Load()}
}

// Watches is what every watch stream of a replica shares: the per-caller
// limit on open streams (WatchRun and WatchAsks together) and the events
// they send, built once per run version.
type Watches struct {
	limit  *watchLimit
	events *lru.Cache[eventKey, *Event]
	views  *wire.Views
}

// NewWatches returns the watches of a replica: at most maxPerCaller open
// streams per caller (0: DefaultMaxWatchesPerCaller); events drawn with
// views.
func NewWatches(maxPerCaller int, views *wire.Views) *Watches {
	return &Watches{limit: newWatchLimit(maxPerCaller), events: newEventCache(), views: views}
}

// Slot takes a watch slot for the stream's caller (see watchLimit).
func (w *Watches) Slot(ctx context.Context) (release func(), err error) {
	who, err := Caller(ctx)
	if err != nil {
		return nil, err
	}
	return w.limit.acquire(who)
}

// Stats reports the open watch streams and those refused.
func (w *Watches) Stats() WatchStats { return w.limit.stats() }

// EventCache reports the shared events' cache, for metrics.
func (w *Watches) EventCache() lru.Stats { return w.events.Stats() }

// The events watchers are sent, shared: every watcher of a run at one
// version sends the same immutable message, encoded once, rather than
// building and encoding its own copy of the run (a run holding a 1 MiB
// answer, watched 500 times, is one message, not 500). Bounded in entries
// and in encoded bytes.
const (
	maxSharedEvents      = 64
	maxSharedEventsBytes = 64 << 20
)

type eventKey struct {
	run      string
	version  int64
	snapshot bool // the first event of a stream carries the plan
}

// Event is one watch event and, once a stream has encoded it, its
// encoding, which every uncompressed stream sends as it is.
type Event struct {
	resp *tollgatev1.WatchRunResponse
	size int
	once sync.Once
	pm   *grpc.PreparedMsg // nil: not encodable in advance; each stream encodes resp
}

func newEventCache() *lru.Cache[eventKey, *Event] {
	return lru.NewWeighted(maxSharedEvents, maxSharedEventsBytes,
		func(_ eventKey, e *Event) int64 { return 2 * int64(e.size) }) // the message and its encoding
}

// SendEvent sends a shared event on a watch stream. A stream whose client
// asked for no compression (the usual case) sends the one encoding every
// such stream shares: gRPC sends a prepared message's bytes as they are,
// and a message sent uncompressed is valid on any stream. A compressed
// stream encodes and compresses its own.
func SendEvent(stream grpc.ServerStream, ev *Event) error {
	if plainStream(stream.Context()) {
		ev.once.Do(func() {
			pm := &grpc.PreparedMsg{}
			if pm.Encode(stream, ev.resp) == nil {
				ev.pm = pm
			}
		})
		if ev.pm != nil {
			return stream.SendMsg(ev.pm)
		}
	}
	return stream.SendMsg(ev.resp)
}

// plainStream reports whether the stream sends its messages uncompressed:
// its client sent none compressed, so the server compresses none (gRPC
// answers in the request's compression). Unknown means no.
func plainStream(ctx context.Context) bool {
	st, ok := grpc.ServerTransportStreamFromContext(ctx).(interface{ RecvCompress() string })
	if !ok {
		return false
	}
	rc := st.RecvCompress()
	return rc == "" || rc == encoding.Identity
}

// RunEvent is the watch event of run at its version, built once and
// shared by every watcher; callers must not change it.
func (s *Watches) RunEvent(run *engine.Run, m *engine.Machine, kind tollgatev1.RunEventKind) *Event {
	k := eventKey{run: run.ID, version: run.Version, snapshot: kind == tollgatev1.RunEventKind_RUN_EVENT_KIND_SNAPSHOT}
	if ev, ok := s.events.Get(k); ok {
		return ev
	}
	pr := s.views.Run(run, m)
	if !k.snapshot {
		// The plan does not change: it goes with the snapshot only.
		pr.Plan, pr.PlanCard = nil, ""
	}
	resp := &tollgatev1.WatchRunResponse{Event: &tollgatev1.RunEvent{Cursor: strconv.FormatInt(run.Version, 10), Kind: kind, Time: wire.Time(run.UpdatedAt), RunId: run.ID, RunVersion: uint64(run.Version),
		RunState: pr.State, StateReason: run.Reason, Run: pr}}
	ev := &Event{resp: resp, size: proto.Size(resp)}
	s.events.Add(k, ev)
	return ev
}
