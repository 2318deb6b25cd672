package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
)

// Errors a store returns. Callers match them with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("version conflict: the run changed since it was read")
	ErrDeadline  = errors.New("the ask's deadline has passed by the store's clock")
	ErrDuplicate = errors.New("a run with this request id already exists")
	ErrInvalid   = errors.New("invalid commit")
	// ErrUnavailable says the store could not be reached or is not
	// serving right now (the same call may succeed later); the outcome
	// of a write that fails with it is unknown. Its message is safe to
	// show a client; the error it wraps (naming sockets or addresses)
	// is for the server's log only.
	ErrUnavailable = errors.New("the store is unavailable")
)

// Run is a run as stored: index fields the store can query, and the
// engine's state as opaque bytes.
type Run struct {
	ID          string    `json:"id"`
	Version     int64     `json:"version"`
	State       string    `json:"state"`
	Requester   string    `json:"requester"`
	Skill       string    `json:"skill,omitempty"`
	PlanDigest  string    `json:"plan_digest"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	JournalSeq  int64     `json:"journal_seq"`  // seq of the last journal record
	JournalHead string    `json:"journal_head"` // hash of the last journal record
	Data        []byte    `json:"data"`         // the engine's Run, JSON
}

// Ask is one opened ask as the inbox sees it.
type Ask struct {
	ID        string    `json:"id"` // "RUN/STOP"
	RunID     string    `json:"run_id"`
	Title     string    `json:"title"`
	State     string    `json:"state"`
	Audience  string    `json:"audience"` // who may see it: "user:NAME" or "role:NAME"
	Requester string    `json:"requester"`
	CreatedAt time.Time `json:"created_at"`
	// DueAt is when the ask next needs the clock: its reminder, its
	// escalation or its deadline, whichever comes first and has not
	// happened. Listings sort by it and the deadline pass reads it.
	DueAt time.Time `json:"due_at"`
}

// Standing is a standing approval: later asks whose every governed action
// lies within Scope (package standing) are approved by it until Until,
// unless revoked. It is stored whole and replaced whole.
type Standing struct {
	ID           string    `json:"id"`
	AskID        string    `json:"ask_id"` // the ask it was granted on
	GrantedBy    string    `json:"granted_by"`
	GrantedAt    time.Time `json:"granted_at"`
	Until        time.Time `json:"until"`
	Scope        string    `json:"scope"`
	Reason       string    `json:"reason,omitempty"`
	Revoked      bool      `json:"revoked,omitempty"`
	RevokedBy    string    `json:"revoked_by,omitempty"`
	RevokedAt    time.Time `json:"revoked_at,omitzero"`
	RevokeReason string    `json:"revoke_reason,omitempty"`
	// GrantedGroups are the granter's identity-provider groups the grant
	// was judged with (their own token's); each time it applies, the
	// granter is judged with them again, under the policy in force then.
	GrantedGroups []string `json:"granted_groups,omitempty"`
}

// AskID joins a run id and a stopping point id.
func AskID(runID, stop string) string { return runID + "/" + stop }

// JournalRecord is one append-only, hash-chained entry of a run's journal.
type JournalRecord struct {
	RunID    string          `json:"run_id"`
	Seq      int64           `json:"seq"` // 1, 2, 3… per run
	Time     time.Time       `json:"time"`
	Actor    string          `json:"actor"`
	Kind     string          `json:"kind"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// Commit is one transition to make durable in one atomic write.
type Commit struct {
	// Run is the new state. Its Version must be ExpectVersion+1, and its
	// JournalSeq/JournalHead must be those of the last record in Journal.
	Run Run
	// ExpectVersion is the version the transition was computed from; 0
	// creates the run (and fails with ErrConflict if it exists).
	ExpectVersion int64
	// Asks are the ask rows this transition opened or changed.
	Asks []Ask
	// Journal holds the records to append, chained with Chain.
	Journal []JournalRecord
	// Deadline, when set, must still be in the future by the store's own
	// clock when the commit lands (I4); otherwise ErrDeadline and nothing
	// is written.
	Deadline time.Time
	// RequestKey makes a create idempotent: a second create with the same
	// key fails with a *DuplicateError naming the first run.
	RequestKey string
	// Enqueue adds work entries of this run (work.go): an entry whose id
	// the run already holds is left as it is. An entry with an Owner is
	// claimed by it at once; one without waits for any claimer, and a
	// hint names its queue.
	Enqueue []Work
	// Finish removes work entries of this run, waiting or claimed, before
	// Enqueue adds any: finishing an id and enqueuing it again moves it
	// (to another queue or owner).
	Finish []WorkRef
	// Origin names the replica committing, carried by the commit's hint
	// (a replica ignores hints of its own commits); "" for none.
	Origin string
}

// DuplicateError says which run an idempotent create already made.
type DuplicateError struct{ RunID string }

func (e *DuplicateError) Error() string { return ErrDuplicate.Error() + ": " + e.RunID }

// Unwrap makes errors.Is(err, ErrDuplicate) work.
func (e *DuplicateError) Unwrap() error { return ErrDuplicate }

// RunQuery filters ListRuns. Empty fields match everything.
type RunQuery struct {
	States    []string
	Requester string
	Limit     int    // 0 means 50; at most 500
	PageToken string // from the previous page
}

// AskQuery filters ListAsks. Empty fields match everything.
type AskQuery struct {
	States    []string
	Audiences []string // any of these
	RunID     string
	DueBefore time.Time // only asks due (DueAt) before this
	Limit     int
	PageToken string
}

// Store keeps runs, asks, plans and journals. Implementations must pass
// storetest.Run. Every method is safe for concurrent use.
type Store interface {
	// Now is the store's clock; deadlines are judged by it.
	Now(ctx context.Context) (time.Time, error)
	// Heartbeat records that a control-plane replica is alive for ttl
	// more, by the store's clock. Alive reports whether a replica's last
	// heartbeat has not lapsed. Leases belong to live replicas: recovery
	// leaves a live replica's leases alone.
	Heartbeat(ctx context.Context, replica string, ttl time.Duration) error
	Alive(ctx context.Context, replica string) (bool, error)
	// Leave ends a replica's heartbeat at once (a replica that drained and
	// stops): others need not wait for it to lapse.
	Leave(ctx context.Context, replica string) error
	// Commit applies c atomically: every precondition is checked before
	// anything is written.
	Commit(ctx context.Context, c Commit) error
	// GetRun returns a run or ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// GetRuns reads several runs at once (a listing's page), in one
	// round trip to the store however many shards or nodes hold them:
	// runs[i] is ids[i]'s run, Data included; an id may repeat. A run the
	// store does not hold is the zero Run at its place (ID ""), not an
	// error: a page's rows may name runs that are gone since, and the
	// caller decides what that means. Each run is one a commit wrote, but
	// the runs are not one snapshot: a commit may land between two of
	// them. The error is for the call as a whole (ErrUnavailable, a run
	// that does not decode); none for an empty ids.
	GetRuns(ctx context.Context, ids []string) ([]Run, error)
	// RequestedRun is the run a create with RequestKey key made, or ""
	// when none has committed (a claim whose commit is in flight, or was
	// abandoned, names no run yet).
	RequestedRun(ctx context.Context, key string) (string, error)
	// RunVersion returns a run's version alone, or ErrNotFound: a reader
	// that holds that version decoded needs nothing else.
	RunVersion(ctx context.Context, id string) (int64, error)
	// ListRuns returns runs newest first (Data may be left out), and a token for the next page
	// ("" at the end).
	ListRuns(ctx context.Context, q RunQuery) ([]Run, string, error)
	// GetAsk returns an ask or ErrNotFound.
	GetAsk(ctx context.Context, id string) (Ask, error)
	// ListAsks returns asks by deadline, soonest first, and a next token.
	ListAsks(ctx context.Context, q AskQuery) ([]Ask, string, error)
	// Journal returns up to limit records of a run with Seq > after.
	Journal(ctx context.Context, runID string, after int64, limit int) ([]JournalRecord, error)
	// PutPlan stores a compiled plan under its digest (idempotent).
	PutPlan(ctx context.Context, digest string, data []byte) error
	// GetPlan returns a stored plan or ErrNotFound.
	GetPlan(ctx context.Context, digest string) ([]byte, error)
	// PutStanding stores a standing approval, replacing one with its id.
	PutStanding(ctx context.Context, e Standing) error
	// ListStanding returns every standing approval, revoked and expired
	// ones included, by id.
	ListStanding(ctx context.Context) ([]Standing, error)
	// Counts returns how many runs and asks the store holds in each
	// state, across every replica's commits. It reads counts the store
	// keeps (no scan of the runs), so a metrics scrape may call it every
	// time. A state that held none may be missing or zero.
	Counts(ctx context.Context) (Counts, error)
	// Work queues, hints and what replicas serve (work.go).
	WorkQueues
	// Saved skills and schedules (registry.go).
	Skills
	Schedules
	// Close releases the store.
	Close() error
}

// Counts are a store's runs by Run.State and asks by Ask.State.
type Counts struct {
	Runs map[string]int64
	Asks map[string]int64
}

// Limit applies the page size rules.
func Limit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}

// Chain fills in Seq, PrevHash and Hash of recs so they follow the record
// (prevSeq, prevHash), and returns the new head.
func Chain(runID string, prevSeq int64, prevHash string, recs []JournalRecord) (int64, string) {
	for i := range recs {
		prevSeq++
		recs[i].RunID = runID
		recs[i].Seq = prevSeq
		recs[i].PrevHash = prevHash
		recs[i].Hash = HashRecord(recs[i])
		prevHash = recs[i].Hash
	}
	return prevSeq, prevHash
}

// HashRecord is r's link in its run's hash chain:
// freshness.JournalDigest of every field of r but Hash.
func HashRecord(r JournalRecord) string {
	return freshness.JournalDigest(freshness.JournalRecord{RunID: r.RunID, Seq: r.Seq, Time: r.Time, Actor: r.Actor, Kind: r.Kind, Payload: r.Payload, PrevHash: r.PrevHash})
}

// VerifyChain checks that recs (a whole journal, in order) link up and
// that every hash matches its record. It returns the seq of the first bad
// record, or 0.
func VerifyChain(recs []JournalRecord) (int64, error) {
	prev := ""
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			return r.Seq, fmt.Errorf("record %d has seq %d", i+1, r.Seq)
		}
		if r.PrevHash != prev {
			return r.Seq, fmt.Errorf("record %d does not follow record %d", r.Seq, r.Seq-1)
		}
		if HashRecord(r) != r.Hash {
			return r.Seq, fmt.Errorf("record %d was altered: its hash does not match", r.Seq)
		}
		prev = r.Hash
	}
	return 0, nil
}

// CheckCommit validates a commit's shape; stores call it first.
func CheckCommit(c Commit) error {
	r := c.Run
	if r.ID == "" || r.Version != c.ExpectVersion+1 {
		return fmt.Errorf("%w: run %q version %d after %d", ErrInvalid, r.ID, r.Version, c.ExpectVersion)
	}
	for _, a := range c.Asks {
		if a.RunID != r.ID || a.ID == "" {
			return fmt.Errorf("%w: ask %q does not belong to run %s", ErrInvalid, a.ID, r.ID)
		}
	}
	if n := len(c.Journal); n > 0 {
		last := c.Journal[n-1]
		if last.Seq != r.JournalSeq || last.Hash != r.JournalHead || c.Journal[0].Seq != r.JournalSeq-int64(n)+1 {
			return fmt.Errorf("%w: journal head does not match the run", ErrInvalid)
		}
	}
	return CheckWorkCommit(c)
}
