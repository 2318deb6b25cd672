package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// registry is the memstore's saved skills and schedules. Guarded by
// Store.mu. What goes in and comes out is copied (cloneSchedule), so no
// caller shares a map or a claim with the store.
type registry struct {
	skills    map[string][]store.SkillVersion // name → versions; version n at index n-1
	schedules map[string]store.Schedule
}

// nameToken is ListSkills' page token: the shared encoding (token.go),
// keyed by the name alone.
func nameToken(name string) string { return store.PageToken(time.Unix(0, 0), name) }

// AddSkillVersion implements store.Skills.
func (s *Store) AddSkillVersion(_ context.Context, v store.SkillVersion, expect int64) (store.SkillVersion, error) {
	if v.Name == "" {
		return store.SkillVersion{}, fmt.Errorf("memstore: a skill without a name: %w", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.reg.skills[v.Name]
	if int64(len(vs)) != expect {
		return store.SkillVersion{}, store.ErrConflict
	}
	if s.reg.skills == nil {
		s.reg.skills = map[string][]store.SkillVersion{}
	}
	v.Version = expect + 1
	s.reg.skills[v.Name] = append(vs, v)
	return v, nil
}

// SkillVersion implements store.Skills.
func (s *Store) SkillVersion(_ context.Context, name string, version int64) (store.SkillVersion, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	vs := s.reg.skills[name]
	if version == 0 {
		version = int64(len(vs))
	}
	if version < 1 || version > int64(len(vs)) {
		return store.SkillVersion{}, store.ErrNotFound
	}
	return vs[version-1], nil
}

// SkillHistory implements store.Skills: limit is bounded by store.Limit.
func (s *Store) SkillHistory(_ context.Context, name string, after int64, limit int) ([]store.SkillVersion, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	vs := s.reg.skills[name]
	after = min(max(after, 0), int64(len(vs)))
	vs = vs[after:]
	out := slices.Clone(vs[:min(len(vs), store.Limit(limit))])
	for i := range out {
		out[i].Source = ""
	}
	if out == nil {
		out = []store.SkillVersion{}
	}
	return out, nil
}

// ListSkills implements store.Skills.
func (s *Store) ListSkills(_ context.Context, pageToken string, limit int) ([]store.SkillVersion, string, error) {
	after := ""
	if pageToken != "" {
		var err error
		if _, after, err = store.ParsePageToken(pageToken); err != nil {
			return nil, "", err
		}
	}
	limit = store.Limit(limit)
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []store.SkillVersion{}
	for _, name := range slices.Sorted(maps.Keys(s.reg.skills)) {
		vs := s.reg.skills[name]
		latest := vs[len(vs)-1]
		if (pageToken != "" && name <= after) || latest.Deleted {
			continue
		}
		if len(out) == limit {
			return out, nameToken(out[limit-1].Name), nil
		}
		latest.Source = ""
		out = append(out, latest)
	}
	return out, "", nil
}

// cloneSchedule copies the parts of sc that a caller could change
// through: its inputs and its pending claim.
func cloneSchedule(sc store.Schedule) store.Schedule {
	sc.Inputs = maps.Clone(sc.Inputs)
	if sc.Pending != nil {
		p := *sc.Pending
		sc.Pending = &p
	}
	return sc
}

// PutSchedule implements store.Schedules.
func (s *Store) PutSchedule(_ context.Context, sc store.Schedule, expect int64) (store.Schedule, error) {
	if sc.Name == "" {
		return store.Schedule{}, fmt.Errorf("memstore: a schedule without a name: %w", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.reg.schedules[sc.Name]
	if (expect == 0 && ok) || (expect != 0 && (!ok || cur.Version != expect || !cur.CreatedAt.Equal(sc.CreatedAt))) {
		return store.Schedule{}, store.ErrConflict
	}
	if s.reg.schedules == nil {
		s.reg.schedules = map[string]store.Schedule{}
	}
	sc.Version = expect + 1
	sc = cloneSchedule(sc)
	s.reg.schedules[sc.Name] = sc
	return cloneSchedule(sc), nil
}

// GetSchedule implements store.Schedules.
func (s *Store) GetSchedule(_ context.Context, name string) (store.Schedule, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc, ok := s.reg.schedules[name]
	if !ok {
		return store.Schedule{}, store.ErrNotFound
	}
	return cloneSchedule(sc), nil
}

// ListSchedules implements store.Schedules.
func (s *Store) ListSchedules(context.Context) ([]store.Schedule, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]store.Schedule, 0, len(s.reg.schedules))
	for _, name := range slices.Sorted(maps.Keys(s.reg.schedules)) {
		out = append(out, cloneSchedule(s.reg.schedules[name]))
	}
	return out, nil
}

// DeleteSchedule implements store.Schedules.
func (s *Store) DeleteSchedule(_ context.Context, name string, expect int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.reg.schedules[name]
	switch {
	case !ok:
		return store.ErrNotFound
	case cur.Version != expect:
		return store.ErrConflict
	}
	delete(s.reg.schedules, name)
	return nil
}
