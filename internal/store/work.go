package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Work queues hold what any replica may pick up: runnable steps waiting
// for an executor, webhook deliveries waiting to be sent. An entry lives
// beside its run (the run's shard, one Redis Cluster slot), so the commit
// that makes work ready enqueues it in the same atomic write as the run
// (Commit.Enqueue) and the commit that settles it removes it
// (Commit.Finish). A replica claims entries (ClaimWork): a claimed entry
// is owned by that replica until it is finished or released; the claims
// of a replica whose liveness lapsed are released by the others
// (ClaimedWork, ReleaseWork). An entry enqueued with an owner is claimed
// by it at once: the direct hand-off of the replica that made the work
// ready and can do it itself.

// Work is one entry of a work queue.
type Work struct {
	Queue string // which queue; replicas claim by queue
	ID    string // unique among the run's work
	RunID string // the run it belongs to (its shard holds the entry)
	Body  []byte // what the worker needs beyond the run; may be empty
	Owner string // the replica that claimed it; "" while it waits
}

// Ref names a Work entry.
func (w Work) Ref() WorkRef { return WorkRef{Queue: w.Queue, ID: w.ID, RunID: w.RunID} }

// WorkRef names one entry of a work queue.
type WorkRef struct {
	Queue string
	ID    string
	RunID string
}

// Limits on work entries: a queue name or id that a key or a hint cannot
// carry is refused (ErrInvalid).
const (
	MaxWorkName = 512
	MaxWorkBody = 1 << 20
)

// CheckWork refuses a work entry no store can keep: empty or oversized
// names, names with a newline (hints and Redis values are
// newline-separated), a body over MaxWorkBody.
func CheckWork(runID string, w WorkRef, body []byte) error {
	for _, f := range []struct{ name, v string }{{"queue", w.Queue}, {"id", w.ID}} {
		if f.v == "" || len(f.v) > MaxWorkName || strings.ContainsAny(f.v, "\n\x00") {
			return fmt.Errorf("%w: work %s %q: empty, over %d bytes, or holding a newline", ErrInvalid, f.name, f.v, MaxWorkName)
		}
	}
	if w.RunID != runID {
		return fmt.Errorf("%w: work %q belongs to run %q, not %q", ErrInvalid, w.ID, w.RunID, runID)
	}
	if len(body) > MaxWorkBody {
		return fmt.Errorf("%w: work %q carries %d bytes, more than %d", ErrInvalid, w.ID, len(body), MaxWorkBody)
	}
	return nil
}

// Hint says something changed in the store: a run committed (Run,
// Version) or work waits in a queue (Queue). Hints are never the source
// of truth: one may be lost, come twice, or arrive before the reader's
// own view catches up; whoever acts on a hint reads the store, and reads
// it on a tick as well.
type Hint struct {
	Run     string
	Version int64
	Origin  string // the replica that committed (Commit.Origin), if any
	Queue   string
}

// Replica is what a live replica announced (Announce): the queues its
// executors serve.
type Replica struct {
	Name   string
	Queues []string
}

// WorkQueues is the part of a Store that holds work queues, hints and
// what each replica serves.
type WorkQueues interface {
	// ClaimWork takes up to n waiting entries of queue, oldest first
	// within each shard, and makes owner their owner. Two claimers never
	// get the same entry.
	ClaimWork(ctx context.Context, queue, owner string, n int) ([]Work, error)
	// ReleaseWork puts entries owner still owns back to waiting; entries
	// finished or owned by another are left alone.
	ReleaseWork(ctx context.Context, owner string, refs []WorkRef) error
	// FinishWork removes entries, waiting or claimed by anyone.
	FinishWork(ctx context.Context, refs []WorkRef) error
	// EnsureWork adds entries whose id their run does not hold yet, as
	// Commit.Enqueue does, outside a commit: for work a run holds from
	// before work queues existed (recovery after an upgrade). It returns
	// how many it added.
	EnsureWork(ctx context.Context, ws []Work) (int, error)
	// ClaimedWork returns every claimed entry with its owner (bounded by
	// what is in flight), for releasing the claims of replicas gone.
	ClaimedWork(ctx context.Context) ([]Work, error)
	// WaitingWork returns up to n waiting entries of queue, for readers
	// (metrics, tests); it claims nothing.
	WaitingWork(ctx context.Context, queue string, n int) ([]Work, error)
	// Hints calls f with every hint, from every replica's commits, until
	// ctx ends; it returns ctx's error. f must not block. Hints missed
	// while the store was unreachable are lost (readers poll too).
	Hints(ctx context.Context, f func(Hint)) error
	// Announce records, for ttl by the store's clock, the queues
	// replica's executors serve; Served lists what live replicas
	// announced.
	Announce(ctx context.Context, replica string, queues []string, ttl time.Duration) error
	Served(ctx context.Context) ([]Replica, error)
}

// CheckWorkCommit checks a commit's work entries.
func CheckWorkCommit(c Commit) error {
	for _, w := range c.Enqueue {
		if err := CheckWork(c.Run.ID, w.Ref(), w.Body); err != nil {
			return err
		}
	}
	for _, r := range c.Finish {
		if err := CheckWork(c.Run.ID, r, nil); err != nil {
			return err
		}
	}
	if len(c.Origin) > MaxWorkName || strings.ContainsAny(c.Origin, " \n\x00") {
		return fmt.Errorf("%w: commit origin %q: over %d bytes, or holding a space or newline", ErrInvalid, c.Origin, MaxWorkName)
	}
	return nil
}
