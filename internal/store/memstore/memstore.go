package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// Config configures the store.
type Config struct {
	// Now is the store's clock; nil means time.Now.
	Now func() time.Time
}

// Store is an in-memory store.Store.
type Store struct {
	now     func() time.Time
	mu      sync.RWMutex
	runs    map[string]store.Run
	asks    map[string]store.Ask
	journal map[string][]store.JournalRecord
	plans   map[string][]byte
	keys    map[string]string // request key → run id
	// runStates and askStates count rows by state, kept by Commit.
	runStates map[string]int64
	askStates map[string]int64

	standing map[string]store.Standing
	alive    map[string]time.Time // replica → when its heartbeat lapses
	work     work
	reg      registry // saved skills and schedules (registry.go)
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{now: cfg.Now, runs: map[string]store.Run{}, asks: map[string]store.Ask{},
		journal: map[string][]store.JournalRecord{}, plans: map[string][]byte{}, keys: map[string]string{},
		runStates: map[string]int64{}, askStates: map[string]int64{}}
}

// Now implements store.Store.
func (s *Store) Now(context.Context) (time.Time, error) { return s.now().UTC(), nil }

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(_ context.Context, replica string, ttl time.Duration) error {
	if replica == "" || ttl <= 0 {
		return fmt.Errorf("memstore: a heartbeat needs a replica and a positive ttl: %w", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.alive == nil {
		s.alive = map[string]time.Time{}
	}
	s.alive[replica] = s.now().Add(ttl)
	return nil
}

// Leave implements store.Store.
func (s *Store) Leave(_ context.Context, replica string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.alive, replica)
	return nil
}

// Alive implements store.Store.
func (s *Store) Alive(_ context.Context, replica string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.alive[replica]
	return ok && s.now().Before(until), nil
}

// Commit implements store.Store: every precondition is checked under the
// lock before anything is written.
func (s *Store) Commit(ctx context.Context, c store.Commit) error {
	if err := store.CheckCommit(c); err != nil {
		return err
	}
	s.mu.Lock()
	hints, err := s.commit(c)
	s.mu.Unlock()
	if err == nil {
		s.hint(append(hints, store.Hint{Run: c.Run.ID, Version: c.Run.Version, Origin: c.Origin})...)
	}
	return err
}

// commit checks and writes c; s.mu is held. It returns the queue hints
// to send after the lock is released.
// RequestedRun implements store.Store.
func (s *Store) RequestedRun(_ context.Context, key string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key], nil
}

func (s *Store) commit(c store.Commit) ([]store.Hint, error) {
	cur, exists := s.runs[c.Run.ID]
	switch {
	case c.ExpectVersion == 0 && exists:
		return nil, store.ErrConflict
	case c.ExpectVersion != 0 && (!exists || cur.Version != c.ExpectVersion):
		return nil, store.ErrConflict
	}
	if c.ExpectVersion == 0 && c.RequestKey != "" {
		if id, ok := s.keys[c.RequestKey]; ok {
			return nil, &store.DuplicateError{RunID: id}
		}
	}
	if !c.Deadline.IsZero() && !s.now().Before(c.Deadline) {
		return nil, store.ErrDeadline
	}
	if exists && len(c.Journal) > 0 && c.Journal[0].PrevHash != cur.JournalHead {
		return nil, store.ErrConflict
	}
	// Write.
	if c.RequestKey != "" && c.ExpectVersion == 0 {
		s.keys[c.RequestKey] = c.Run.ID
	}
	r := c.Run
	r.Data = slices.Clone(r.Data)
	if exists {
		s.runStates[cur.State]--
	}
	s.runStates[r.State]++
	s.runs[r.ID] = r
	for _, a := range c.Asks {
		if old, ok := s.asks[a.ID]; ok {
			s.askStates[old.State]--
		}
		s.askStates[a.State]++
		s.asks[a.ID] = a
	}
	s.journal[r.ID] = append(s.journal[r.ID], c.Journal...)
	return s.enqueue(c), nil
}

// GetRun implements store.Store.
func (s *Store) GetRun(_ context.Context, id string) (store.Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.runs[id]
	if !ok {
		return store.Run{}, store.ErrNotFound
	}
	r.Data = slices.Clone(r.Data)
	return r, nil
}

// GetRuns implements store.Store: one read under the lock, so here the
// runs are one snapshot (more than the contract promises).
func (s *Store) GetRuns(_ context.Context, ids []string) ([]store.Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]store.Run, len(ids))
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i, id := range ids {
		if r, ok := s.runs[id]; ok {
			r.Data = slices.Clone(r.Data)
			out[i] = r
		}
	}
	return out, nil
}

// RunVersion implements store.Store.
func (s *Store) RunVersion(_ context.Context, id string) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.runs[id]
	if !ok {
		return 0, store.ErrNotFound
	}
	return r.Version, nil
}

// ListRuns implements store.Store: newest first.
func (s *Store) ListRuns(_ context.Context, q store.RunQuery) ([]store.Run, string, error) {
	s.mu.RLock()
	var all []store.Run
	for _, r := range s.runs {
		if (len(q.States) == 0 || slices.Contains(q.States, r.State)) && (q.Requester == "" || q.Requester == r.Requester) {
			r.Data = nil
			all = append(all, r)
		}
	}
	s.mu.RUnlock()
	key := func(r store.Run) (time.Time, string) { return r.CreatedAt, r.ID }
	return page(all, q.PageToken, q.Limit, key, true)
}

// Counts implements store.Store from the counts Commit keeps.
func (s *Store) Counts(context.Context) (store.Counts, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return store.Counts{Runs: maps.Clone(s.runStates), Asks: maps.Clone(s.askStates)}, nil
}

// GetAsk implements store.Store.
func (s *Store) GetAsk(_ context.Context, id string) (store.Ask, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.asks[id]
	if !ok {
		return store.Ask{}, store.ErrNotFound
	}
	return a, nil
}

// ListAsks implements store.Store: soonest deadline first.
func (s *Store) ListAsks(_ context.Context, q store.AskQuery) ([]store.Ask, string, error) {
	s.mu.RLock()
	var all []store.Ask
	for _, a := range s.asks {
		if (len(q.States) == 0 || slices.Contains(q.States, a.State)) &&
			(len(q.Audiences) == 0 || slices.Contains(q.Audiences, a.Audience)) &&
			(q.RunID == "" || q.RunID == a.RunID) &&
			(q.DueBefore.IsZero() || a.DueAt.Before(q.DueBefore)) {
			all = append(all, a)
		}
	}
	s.mu.RUnlock()
	key := func(a store.Ask) (time.Time, string) { return a.DueAt, a.ID }
	return page(all, q.PageToken, q.Limit, key, false)
}

// page orders rows by key (time, then id; descending when desc), skips
// past the page token's key, and cuts a page with the next token.
func page[T any](rows []T, token string, limit int, key func(T) (time.Time, string), desc bool) ([]T, string, error) {
	order := func(a, b T) int {
		at, aid := key(a)
		bt, bid := key(b)
		c := at.Compare(bt)
		if c == 0 {
			c = cmpString(aid, bid)
		}
		if desc {
			return -c
		}
		return c
	}
	slices.SortFunc(rows, order)
	if token != "" {
		afterAt, afterID, err := store.ParsePageToken(token)
		if err != nil {
			return nil, "", err
		}
		i := 0
		for i < len(rows) {
			at, id := key(rows[i])
			c := at.Compare(afterAt)
			if c == 0 {
				c = cmpString(id, afterID)
			}
			if desc {
				c = -c
			}
			if c > 0 {
				break
			}
			i++
		}
		rows = rows[i:]
	}
	limit = store.Limit(limit)
	if len(rows) <= limit {
		return rows, "", nil
	}
	at, id := key(rows[limit-1])
	return rows[:limit], store.PageToken(at, id), nil
}

// Journal implements store.Store.
func (s *Store) Journal(_ context.Context, runID string, after int64, limit int) ([]store.JournalRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	recs := s.journal[runID]
	if len(recs) == 0 {
		return nil, nil
	}
	// Records are contiguous in seq from the first, which follows the
	// run's first head: 1 usually, later for a chain begun elsewhere.
	i := max(after-(recs[0].Seq-1), 0)
	if i >= int64(len(recs)) {
		return nil, nil
	}
	out := recs[i:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return slices.Clone(out), nil
}

// PutPlan implements store.Store.
func (s *Store) PutPlan(_ context.Context, digest string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.plans[digest]; !ok {
		s.plans[digest] = slices.Clone(data)
	}
	return nil
}

// GetPlan implements store.Store.
func (s *Store) GetPlan(_ context.Context, digest string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.plans[digest]
	if !ok {
		return nil, store.ErrNotFound
	}
	return slices.Clone(p), nil
}

// Close implements store.Store.
func (s *Store) Close() error { return nil }

// PutStanding implements store.Store.
func (s *Store) PutStanding(_ context.Context, e store.Standing) error {
	if e.ID == "" {
		return fmt.Errorf("exception without an id: %w", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.standing == nil {
		s.standing = map[string]store.Standing{}
	}
	s.standing[e.ID] = e
	return nil
}

// ListStanding implements store.Store.
func (s *Store) ListStanding(context.Context) ([]store.Standing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Standing, 0, len(s.standing))
	for _, id := range slices.Sorted(maps.Keys(s.standing)) {
		out = append(out, s.standing[id])
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
