package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// work is the memstore's work queues: entries by run and id, a FIFO
// sequence for waiting ones, and hint subscribers. Guarded by Store.mu.
type work struct {
	entries map[workKey]*workEntry
	seq     int64
	served  map[string]servedEntry

	hmu  sync.Mutex
	subs map[*func(store.Hint)]bool
}

type workKey struct{ run, id string }

type workEntry struct {
	w   store.Work
	seq int64 // order among waiting entries
}

type servedEntry struct {
	until  time.Time
	queues []string
}

// enqueue applies a commit's work entries; s.mu is held. It returns the
// hints to send once the lock is released.
func (s *Store) enqueue(c store.Commit) []store.Hint {
	if s.work.entries == nil {
		s.work.entries = map[workKey]*workEntry{}
	}
	var hints []store.Hint
	// Finished first: a commit may finish an id and enqueue it anew.
	for _, r := range c.Finish {
		delete(s.work.entries, workKey{r.RunID, r.ID})
	}
	for _, w := range c.Enqueue {
		k := workKey{w.RunID, w.ID}
		if _, ok := s.work.entries[k]; ok {
			continue
		}
		s.work.seq++
		w.Body = slices.Clone(w.Body)
		s.work.entries[k] = &workEntry{w: w, seq: s.work.seq}
		if w.Owner == "" {
			hints = append(hints, store.Hint{Queue: w.Queue})
		}
	}
	return hints
}

// EnsureWork implements store.WorkQueues.
func (s *Store) EnsureWork(_ context.Context, ws []store.Work) (int, error) {
	for _, w := range ws {
		if err := store.CheckWork(w.RunID, w.Ref(), w.Body); err != nil {
			return 0, err
		}
	}
	s.mu.Lock()
	before := len(s.work.entries)
	hints := s.enqueue(store.Commit{Enqueue: ws})
	added := len(s.work.entries) - before
	s.mu.Unlock()
	s.hint(hints...)
	return added, nil
}

// ClaimWork implements store.WorkQueues.
func (s *Store) ClaimWork(_ context.Context, queue, owner string, n int) ([]store.Work, error) {
	if owner == "" || n <= 0 {
		return nil, fmt.Errorf("memstore: a claim needs an owner and a positive count: %w", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	waiting := s.waiting(queue)
	var out []store.Work
	for _, e := range waiting[:min(n, len(waiting))] {
		e.w.Owner = owner
		out = append(out, cloneWork(e.w))
	}
	return out, nil
}

// ReleaseWork implements store.WorkQueues.
func (s *Store) ReleaseWork(_ context.Context, owner string, refs []store.WorkRef) error {
	s.mu.Lock()
	var hints []store.Hint
	for _, r := range refs {
		if e, ok := s.work.entries[workKey{r.RunID, r.ID}]; ok && e.w.Owner == owner && owner != "" && e.w.Queue == r.Queue {
			s.work.seq++
			e.w.Owner, e.seq = "", s.work.seq
			hints = append(hints, store.Hint{Queue: e.w.Queue})
		}
	}
	s.mu.Unlock()
	s.hint(hints...)
	return nil
}

// FinishWork implements store.WorkQueues.
func (s *Store) FinishWork(_ context.Context, refs []store.WorkRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range refs {
		delete(s.work.entries, workKey{r.RunID, r.ID})
	}
	return nil
}

// ClaimedWork implements store.WorkQueues.
func (s *Store) ClaimedWork(context.Context) ([]store.Work, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Work
	for _, e := range s.work.entries {
		if e.w.Owner != "" {
			out = append(out, cloneWork(e.w))
		}
	}
	slices.SortFunc(out, func(a, b store.Work) int { return cmpString(a.RunID+"\n"+a.ID, b.RunID+"\n"+b.ID) })
	return out, nil
}

// waiting returns queue's waiting entries, oldest first; s.mu is held.
func (s *Store) waiting(queue string) []*workEntry {
	var out []*workEntry
	for _, e := range s.work.entries {
		if e.w.Queue == queue && e.w.Owner == "" {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *workEntry) int { return int(a.seq - b.seq) })
	return out
}

// WaitingWork implements store.WorkQueues.
func (s *Store) WaitingWork(_ context.Context, queue string, n int) ([]store.Work, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	waiting := s.waiting(queue)
	var out []store.Work
	for _, e := range waiting[:min(max(n, 0), len(waiting))] {
		out = append(out, cloneWork(e.w))
	}
	return out, nil
}

// Hints implements store.WorkQueues: every commit of this store, from any
// Runner sharing it, hints its run.
func (s *Store) Hints(ctx context.Context, f func(store.Hint)) error {
	key := &f
	s.work.hmu.Lock()
	if s.work.subs == nil {
		s.work.subs = map[*func(store.Hint)]bool{}
	}
	s.work.subs[key] = true
	s.work.hmu.Unlock()
	<-ctx.Done()
	s.work.hmu.Lock()
	delete(s.work.subs, key)
	s.work.hmu.Unlock()
	return ctx.Err()
}

// hint hands hints to every subscriber; never under s.mu.
func (s *Store) hint(hs ...store.Hint) {
	if len(hs) == 0 {
		return
	}
	s.work.hmu.Lock()
	defer s.work.hmu.Unlock()
	for f := range s.work.subs {
		for _, h := range hs {
			(*f)(h)
		}
	}
}

// Announce implements store.WorkQueues.
func (s *Store) Announce(_ context.Context, replica string, queues []string, ttl time.Duration) error {
	if replica == "" || ttl <= 0 {
		return fmt.Errorf("memstore: an announcement needs a replica and a positive ttl: %w", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.work.served == nil {
		s.work.served = map[string]servedEntry{}
	}
	s.work.served[replica] = servedEntry{until: s.now().Add(ttl), queues: slices.Clone(queues)}
	return nil
}

// Served implements store.WorkQueues.
func (s *Store) Served(context.Context) ([]store.Replica, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []store.Replica
	for name, e := range s.work.served {
		if now.Before(e.until) {
			out = append(out, store.Replica{Name: name, Queues: slices.Clone(e.queues)})
		}
	}
	slices.SortFunc(out, func(a, b store.Replica) int { return cmpString(a.Name, b.Name) })
	return out, nil
}

func cloneWork(w store.Work) store.Work {
	w.Body = slices.Clone(w.Body)
	return w
}
