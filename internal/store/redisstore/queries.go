package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// runListFields are the run fields a listing returns (not the data).
var runListFields = []string{"version", "state", "requester", "skill", "plan_digest", "created_ns", "updated_ns", "journal_seq", "journal_head"}

func decodeRun(id string, m map[string]string) (store.Run, error) {
	r := store.Run{ID: id, State: m["state"], Requester: m["requester"], Skill: m["skill"], PlanDigest: m["plan_digest"],
		JournalHead: m["journal_head"]}
	var err error
	if r.Version, err = strconv.ParseInt(m["version"], 10, 64); err != nil {
		return store.Run{}, fmt.Errorf("redisstore: run %s has a bad version %q", id, m["version"])
	}
	if v := m["journal_seq"]; v != "" {
		if r.JournalSeq, err = strconv.ParseInt(v, 10, 64); err != nil {
			return store.Run{}, fmt.Errorf("redisstore: run %s has a bad journal seq %q", id, v)
		}
	}
	if r.CreatedAt, err = parseNS(m["created_ns"]); err != nil {
		return store.Run{}, err
	}
	if r.UpdatedAt, err = parseNS(m["updated_ns"]); err != nil {
		return store.Run{}, err
	}
	if d := m["data"]; d != "" {
		r.Data = []byte(d)
	}
	return r, nil
}

func decodeAsk(id string, m map[string]string) (store.Ask, error) {
	a := store.Ask{ID: id, RunID: m["run_id"], Title: m["title"], State: m["state"], Audience: m["audience"], Requester: m["requester"]}
	var err error
	if a.CreatedAt, err = parseNS(m["created_ns"]); err != nil {
		return store.Ask{}, err
	}
	if a.DueAt, err = parseNS(m["expires_ns"]); err != nil {
		return store.Ask{}, err
	}
	return a, nil
}

// RequestedRun implements store.Store: the claim's run once that run
// exists (a claim is written before its run's commit, so a claim alone
// names no run yet).
func (s *Store) RequestedRun(ctx context.Context, key string) (string, error) {
	id, err := s.rdb.HGet(ctx, s.reqKey(key), "run").Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("redisstore: %w", unavailable(err))
	}
	n, err := s.rdb.Exists(ctx, runKey(s.runTag(id), id)).Result()
	if err != nil {
		return "", fmt.Errorf("redisstore: %w", unavailable(err))
	}
	if n == 0 {
		return "", nil
	}
	return id, nil
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	cmd := redis.NewMapStringStringCmd(ctx, "hgetall", runKey(s.runTag(id), id))
	if err := s.batch.do(ctx, cmd); err != nil {
		return store.Run{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	m, err := cmd.Result()
	if err != nil {
		return store.Run{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	if len(m) == 0 {
		return store.Run{}, store.ErrNotFound
	}
	return decodeRun(id, m)
}

// GetRuns implements store.Store: GetRun's read of every run, all in one
// call to the batcher, so in one pipeline (on a cluster, one per node,
// sent at once); each reply goes to the one decoder, decodeRun. The reads
// are independent of each other: their order across nodes does not
// matter.
func (s *Store) GetRuns(ctx context.Context, ids []string) ([]store.Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	reads := make([]*redis.MapStringStringCmd, len(ids))
	cmds := make([]redis.Cmder, len(ids))
	for i, id := range ids {
		reads[i] = redis.NewMapStringStringCmd(ctx, "hgetall", runKey(s.runTag(id), id))
		cmds[i] = reads[i]
	}
	if err := s.batch.do(ctx, cmds...); err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	runs := make([]store.Run, len(ids))
	for i, cmd := range reads {
		m, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil), err == nil && len(m) == 0:
			continue // not held: the zero Run (redis.Nil is how a GET says so)
		case err != nil:
			return nil, fmt.Errorf("redisstore: run %s: %w", ids[i], unavailable(err))
		}
		if runs[i], err = decodeRun(ids[i], m); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// RunVersion implements store.Store.
func (s *Store) RunVersion(ctx context.Context, id string) (int64, error) {
	cmd := redis.NewStringCmd(ctx, "hget", runKey(s.runTag(id), id), "version")
	if err := s.batch.do(ctx, cmd); err != nil {
		return 0, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	v, err := cmd.Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, store.ErrNotFound
	case err != nil:
		return 0, fmt.Errorf("redisstore: run %s: %w", id, unavailable(err))
	}
	return v, nil
}

// GetAsk implements store.Store. An ask lives in its run's shard; its id
// is "RUN/STOP", so the shard follows from the id. An id of another shape
// is looked for in every shard.
func (s *Store) GetAsk(ctx context.Context, id string) (store.Ask, error) {
	tried := map[int]bool{}
	var first []int
	for i := range len(id) {
		if id[i] == '/' {
			if sh := s.shardOf(id[:i]); !tried[sh] {
				tried[sh] = true
				first = append(first, sh)
			}
		}
	}
	a, ok, err := s.findAsk(ctx, id, first)
	if err != nil || ok {
		return a, err
	}
	var rest []int
	for sh := range s.shards {
		if !tried[sh] {
			rest = append(rest, sh)
		}
	}
	if a, ok, err = s.findAsk(ctx, id, rest); err != nil || ok {
		return a, err
	}
	return store.Ask{}, store.ErrNotFound
}

func (s *Store) findAsk(ctx context.Context, id string, shards []int) (store.Ask, bool, error) {
	if len(shards) == 0 {
		return store.Ask{}, false, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(shards))
	for i, sh := range shards {
		cmds[i] = pipe.HGetAll(ctx, askKey(s.tag(sh), id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return store.Ask{}, false, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	for i, cmd := range cmds {
		if m := cmd.Val(); len(m) > 0 && s.shardOf(m["run_id"]) == shards[i] {
			a, err := decodeAsk(id, m)
			return a, err == nil, err
		}
	}
	return store.Ask{}, false, nil
}

// Journal implements store.Store.
func (s *Store) Journal(ctx context.Context, runID string, after int64, limit int) ([]store.JournalRecord, error) {
	after = max(after, 0)
	stop := int64(-1)
	if limit > 0 {
		stop = after + int64(limit) - 1
	}
	vals, err := s.rdb.LRange(ctx, journalKey(s.runTag(runID), runID), after, stop).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	if len(vals) == 0 {
		return nil, nil
	}
	recs := make([]store.JournalRecord, len(vals))
	for i, v := range vals {
		if recs[i], err = decodeRecord(runID, v); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// PutPlan implements store.Store: the first write of a digest wins.
func (s *Store) PutPlan(ctx context.Context, digest string, data []byte) error {
	cmd := redis.NewBoolCmd(ctx, "setnx", s.planKey(digest), data)
	err := s.batch.do(ctx, cmd)
	if err == nil {
		err = cmd.Err()
	}
	if err != nil {
		return fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return nil
}

// GetPlan implements store.Store.
func (s *Store) GetPlan(ctx context.Context, digest string) ([]byte, error) {
	cmd := redis.NewStringCmd(ctx, "get", s.planKey(digest))
	if err := s.batch.do(ctx, cmd); err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	b, err := cmd.Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, store.ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return b, nil
}

// --- listings ---

// source is one sorted set a listing reads, in one shard.
type source struct {
	key string
	tag string
}

// scan describes a merged read of several sorted sets.
type scan struct {
	srcs        []source
	rev         bool   // newest first
	start, stop string // ZRANGE BYSCORE bounds, in the order ZRANGE takes them
	skip        func(entry) bool
	end         func(entry) bool // past the range: this set has nothing more
	need        int
	extra       int // first over-fetch beyond need (to step over the page token's own entry)
}

// collect merges the sources in the store's order and returns the first
// need entries (without duplicate ids). It is a lazy k-way merge: every
// set is read from the bound in small pipelined batches (a share of need,
// not need per set), and only the sets that could still hold one of the
// first need entries are read further. An entry not yet read from a set
// comes after the last one read from it, so once every set that is not
// exhausted has read past the need-th merged entry, the first need are
// final. Entries before the page token are skipped as they come (ties at
// the boundary cost another batch, never a wrong page).
func (s *Store) collect(ctx context.Context, sc scan) ([]entry, error) {
	type state struct {
		source
		off, batch int64
		done       bool
		last       entry // the last entry read (kept or skipped)
		any        bool
		want       bool // read more in the next round
	}
	order := func(a, b entry) int {
		if sc.rev {
			return cmpEntry(b, a)
		}
		return cmpEntry(a, b)
	}
	first := int64(sc.need + sc.extra)
	if n := len(sc.srcs); n > 1 {
		first = min(first, max(int64(2*sc.need/n+sc.extra), 8))
	}
	st := make([]*state, len(sc.srcs))
	for i, src := range sc.srcs {
		st[i] = &state{source: src, batch: first, want: true}
	}
	var merged []entry
	seen := map[string]bool{}
	for {
		pipe := s.rdb.Pipeline()
		var active []*state
		var cmds []*redis.ZSliceCmd
		for _, x := range st {
			if x.want {
				active = append(active, x)
				cmds = append(cmds, pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: x.key, Start: sc.start, Stop: sc.stop,
					ByScore: true, Rev: sc.rev, Offset: x.off, Count: x.batch}))
			}
		}
		if len(active) == 0 {
			break
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redisstore: %w", unavailable(err))
		}
		for i, x := range active {
			zs := cmds[i].Val()
			x.off += int64(len(zs))
			if int64(len(zs)) < x.batch {
				x.done = true
			}
			for _, z := range zs {
				m, _ := z.Member.(string)
				if len(m) < 6 || z.Score != math.Trunc(z.Score) {
					continue // not ours
				}
				e := entry{ms: int64(z.Score), member: m, tag: x.tag}
				if sc.end != nil && sc.end(e) {
					x.done = true
					break
				}
				x.last, x.any = e, true
				if (sc.skip != nil && sc.skip(e)) || seen[e.id()] {
					continue
				}
				seen[e.id()] = true
				merged = append(merged, e)
			}
			x.batch = min(2*x.batch, 1024)
		}
		slices.SortFunc(merged, order)
		// Read on from every live set whose last entry comes before the
		// need-th merged entry: it may hold entries that belong in front.
		more := false
		for _, x := range st {
			x.want = !x.done && (len(merged) < sc.need || !x.any || order(x.last, merged[sc.need-1]) < 0)
			more = more || x.want
		}
		if !more {
			break
		}
	}
	return merged[:min(len(merged), sc.need)], nil
}

// registry reads the states each shard has seen, for a query that names
// none.
func (s *Store) registry(ctx context.Context, key func(tag string) string) ([][]string, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, s.shards)
	for sh := range s.shards {
		cmds[sh] = pipe.SMembers(ctx, key(s.tag(sh)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	out := make([][]string, s.shards)
	for sh, cmd := range cmds {
		out[sh] = cmd.Val()
		slices.Sort(out[sh])
	}
	return out, nil
}

func uniq(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// pageStart turns a page token into its sorted-set position.
func pageStart(tok string) (ms int64, member string, ok bool, err error) {
	if tok == "" {
		return 0, "", false, nil
	}
	at, id, err := store.ParsePageToken(tok)
	if err != nil {
		return 0, "", false, err
	}
	ms, member = scoreMember(at, id)
	return ms, member, true, nil
}

// ListRuns implements store.Store: newest first (CreatedAt, then id, both
// descending).
func (s *Store) ListRuns(ctx context.Context, q store.RunQuery) ([]store.Run, string, error) {
	tokMs, tokMember, hasTok, err := pageStart(q.PageToken)
	if err != nil {
		return nil, "", err
	}
	limit := store.Limit(q.Limit)
	states := uniq(q.States)
	var seenStates [][]string
	if q.Requester != "" && len(states) == 0 {
		if seenStates, err = s.registry(ctx, runStatesKey); err != nil {
			return nil, "", err
		}
	}
	var srcs []source
	for sh := range s.shards {
		tag := s.tag(sh)
		switch {
		case q.Requester != "":
			sts := states
			if len(sts) == 0 {
				sts = seenStates[sh]
			}
			for _, st := range sts {
				srcs = append(srcs, source{runReqKey(tag, q.Requester, st), tag})
			}
		case len(states) > 0:
			for _, st := range states {
				srcs = append(srcs, source{runStateKey(tag, st), tag})
			}
		default:
			srcs = append(srcs, source{runsKey(tag), tag})
		}
	}
	sc := scan{srcs: srcs, rev: true, start: "+inf", stop: "-inf", need: limit + 1}
	if hasTok {
		sc.start, sc.extra = strconv.FormatInt(tokMs, 10), 1
		sc.skip = func(e entry) bool { return e.ms > tokMs || (e.ms == tokMs && e.member >= tokMember) }
	}
	entries, err := s.collect(ctx, sc)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(entries) > limit {
		last := entries[limit-1]
		next = store.PageToken(last.time(), last.id())
		entries = entries[:limit]
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(entries))
	for i, e := range entries {
		cmds[i] = pipe.HMGet(ctx, runKey(e.tag, e.id()), runListFields...)
	}
	if len(entries) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, "", fmt.Errorf("redisstore: %w", unavailable(err))
		}
	}
	runs := make([]store.Run, 0, len(entries))
	for i, e := range entries {
		vals := cmds[i].Val()
		if vals[0] == nil {
			continue // gone since the index was read
		}
		m := make(map[string]string, len(runListFields))
		for j, f := range runListFields {
			m[f] = str(vals[j])
		}
		r, err := decodeRun(e.id(), m)
		if err != nil {
			return nil, "", err
		}
		// The index and the hash are read apart: a run that moved on
		// since no longer matches.
		if (len(states) > 0 && !slices.Contains(states, r.State)) || (q.Requester != "" && r.Requester != q.Requester) {
			continue
		}
		runs = append(runs, r)
	}
	return runs, next, nil
}

// ListAsks implements store.Store: soonest deadline first (DueAt, then
// id).
func (s *Store) ListAsks(ctx context.Context, q store.AskQuery) ([]store.Ask, string, error) {
	tokMs, tokMember, hasTok, err := pageStart(q.PageToken)
	if err != nil {
		return nil, "", err
	}
	if q.RunID != "" {
		return s.listRunAsks(ctx, q)
	}
	limit := store.Limit(q.Limit)
	states, auds := uniq(q.States), uniq(q.Audiences)
	var seenStates [][]string
	if len(states) == 0 {
		if seenStates, err = s.registry(ctx, askStatesKey); err != nil {
			return nil, "", err
		}
	}
	var srcs []source
	for sh := range s.shards {
		tag := s.tag(sh)
		sts := states
		if len(sts) == 0 {
			sts = seenStates[sh]
		}
		for _, st := range sts {
			if len(auds) == 0 {
				srcs = append(srcs, source{askStateKey(tag, st), tag})
			}
			for _, aud := range auds {
				srcs = append(srcs, source{askAudKey(tag, aud, st), tag})
			}
		}
	}
	sc := scan{srcs: srcs, start: "-inf", stop: "+inf", need: limit + 1}
	if hasTok {
		sc.start, sc.extra = strconv.FormatInt(tokMs, 10), 1
		sc.skip = func(e entry) bool { return e.ms < tokMs || (e.ms == tokMs && e.member <= tokMember) }
	}
	if due := q.DueBefore; !due.IsZero() {
		sc.stop = strconv.FormatInt(due.Add(-1).UnixMilli(), 10)
		sc.end = func(e entry) bool { return !e.time().Before(due) }
	}
	entries, err := s.collect(ctx, sc)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(entries) > limit {
		last := entries[limit-1]
		next = store.PageToken(last.time(), last.id())
		entries = entries[:limit]
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(entries))
	for i, e := range entries {
		cmds[i] = pipe.HGetAll(ctx, askKey(e.tag, e.id()))
	}
	if len(entries) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, "", fmt.Errorf("redisstore: %w", unavailable(err))
		}
	}
	asks := make([]store.Ask, 0, len(entries))
	for i, e := range entries {
		m := cmds[i].Val()
		if len(m) == 0 {
			continue
		}
		a, err := decodeAsk(e.id(), m)
		if err != nil {
			return nil, "", err
		}
		if askMatches(a, q, states, auds) {
			asks = append(asks, a)
		}
	}
	return asks, next, nil
}

func askMatches(a store.Ask, q store.AskQuery, states, auds []string) bool {
	return (len(states) == 0 || slices.Contains(states, a.State)) &&
		(len(auds) == 0 || slices.Contains(auds, a.Audience)) &&
		(q.RunID == "" || q.RunID == a.RunID) &&
		(q.DueBefore.IsZero() || a.DueAt.Before(q.DueBefore))
}

// listRunAsks lists one run's asks: the run keeps the ids of its asks.
func (s *Store) listRunAsks(ctx context.Context, q store.AskQuery) ([]store.Ask, string, error) {
	tag := s.runTag(q.RunID)
	list, err := s.rdb.HGet(ctx, runKey(tag, q.RunID), "asks").Result()
	if errors.Is(err, redis.Nil) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: %w", unavailable(err))
	}
	var ids []string
	if err := json.Unmarshal([]byte(list), &ids); err != nil {
		return nil, "", fmt.Errorf("redisstore: run %s has a damaged ask list: %w", q.RunID, err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, askKey(tag, id))
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, "", fmt.Errorf("redisstore: %w", unavailable(err))
		}
	}
	states, auds := uniq(q.States), uniq(q.Audiences)
	var all []store.Ask
	for i, id := range ids {
		m := cmds[i].Val()
		if len(m) == 0 {
			continue
		}
		a, err := decodeAsk(id, m)
		if err != nil {
			return nil, "", err
		}
		if askMatches(a, q, states, auds) {
			all = append(all, a)
		}
	}
	slices.SortFunc(all, func(a, b store.Ask) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if q.PageToken != "" {
		at, afterID, _ := store.ParsePageToken(q.PageToken)
		i := 0
		for i < len(all) && (all[i].DueAt.Before(at) || (all[i].DueAt.Equal(at) && all[i].ID <= afterID)) {
			i++
		}
		all = all[i:]
	}
	limit := store.Limit(q.Limit)
	if len(all) <= limit {
		return all, "", nil
	}
	last := all[limit-1]
	return all[:limit], store.PageToken(last.DueAt, last.ID), nil
}

// --- standing approvals ---

// standingKey is one hash of every standing approval (id → JSON). They
// are few, read whole, and written one at a time.
// The key keeps its first name, ":exceptions": stored data outlives names.
func (s *Store) standingKey() string { return s.prefix + ":exceptions" }

// PutStanding implements store.Store.
func (s *Store) PutStanding(ctx context.Context, e store.Standing) error {
	if e.ID == "" {
		return fmt.Errorf("redisstore: exception without an id: %w", store.ErrInvalid)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("redisstore: encode exception: %w", unavailable(err))
	}
	if err := s.rdb.HSet(ctx, s.standingKey(), e.ID, b).Err(); err != nil {
		return fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return nil
}

// ListStanding implements store.Store.
func (s *Store) ListStanding(ctx context.Context) ([]store.Standing, error) {
	m, err := s.rdb.HGetAll(ctx, s.standingKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	out := make([]store.Standing, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		var e store.Standing
		if err := json.Unmarshal([]byte(m[id]), &e); err != nil {
			return nil, fmt.Errorf("redisstore: exception %s is damaged: %w", id, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Counts implements store.Store: ZCARD of each state index the shards
// have seen (their registries), in two pipelined round trips; nothing is
// scanned.
func (s *Store) Counts(ctx context.Context) (store.Counts, error) {
	pipe := s.rdb.Pipeline()
	runStates := make([]*redis.StringSliceCmd, s.shards)
	askStates := make([]*redis.StringSliceCmd, s.shards)
	for sh := range s.shards {
		runStates[sh] = pipe.SMembers(ctx, runStatesKey(s.tag(sh)))
		askStates[sh] = pipe.SMembers(ctx, askStatesKey(s.tag(sh)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return store.Counts{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	type card struct {
		state string
		runs  bool
		cmd   *redis.IntCmd
	}
	var cards []card
	pipe = s.rdb.Pipeline()
	for sh := range s.shards {
		tag := s.tag(sh)
		for _, st := range runStates[sh].Val() {
			cards = append(cards, card{st, true, pipe.ZCard(ctx, runStateKey(tag, st))})
		}
		for _, st := range askStates[sh].Val() {
			cards = append(cards, card{st, false, pipe.ZCard(ctx, askStateKey(tag, st))})
		}
	}
	out := store.Counts{Runs: map[string]int64{}, Asks: map[string]int64{}}
	if len(cards) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return store.Counts{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	for _, c := range cards {
		if c.runs {
			out.Runs[c.state] += c.cmd.Val()
		} else {
			out.Asks[c.state] += c.cmd.Val()
		}
	}
	return out, nil
}
