package redisstore

import (
	"context"
	"encoding/binary"
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
	cmd := redis.NewStringCmd(ctx, "get", runKey(s.runTag(id), id))
	if err := s.batch.do(ctx, cmd); err != nil {
		return store.Run{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	v, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return store.Run{}, store.ErrNotFound
	case err != nil:
		return store.Run{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return decodeRun(id, v)
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
	reads := make([]*redis.StringCmd, len(ids))
	cmds := make([]redis.Cmder, len(ids))
	for i, id := range ids {
		reads[i] = redis.NewStringCmd(ctx, "get", runKey(s.runTag(id), id))
		cmds[i] = reads[i]
	}
	if err := s.batch.do(ctx, cmds...); err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	runs := make([]store.Run, len(ids))
	for i, cmd := range reads {
		v, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // not held: the zero Run (redis.Nil is how a GET says so)
		case err != nil:
			return nil, fmt.Errorf("redisstore: run %s: %w", ids[i], unavailable(err))
		}
		if runs[i], err = decodeRun(ids[i], v); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// RunVersion implements store.Store: the header's version alone.
func (s *Store) RunVersion(ctx context.Context, id string) (int64, error) {
	cmd := redis.NewStringCmd(ctx, "getrange", runKey(s.runTag(id), id), offVersion, offVersion+7)
	if err := s.batch.do(ctx, cmd); err != nil {
		return 0, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	v, err := cmd.Result()
	switch {
	case err != nil:
		return 0, fmt.Errorf("redisstore: run %s: %w", id, unavailable(err))
	case v == "":
		return 0, store.ErrNotFound
	case len(v) != 8:
		return 0, fmt.Errorf("redisstore: run %s is damaged: its header", id)
	}
	return int64(binary.BigEndian.Uint64([]byte(v))), nil
}

// GetAsk implements store.Store. An ask is kept in its run: the run its
// id names (RUN/STOP), or for an id not so named the run the odd-ask
// hash of some shard records.
func (s *Store) GetAsk(ctx context.Context, id string) (store.Ask, error) {
	asks, err := s.asksOf(ctx, []string{id}, nil)
	if err != nil {
		return store.Ask{}, err
	}
	if asks[0].ID == "" {
		return store.Ask{}, store.ErrNotFound
	}
	return asks[0], nil
}

// asksOf reads the asks named by ids from their runs' meta, in one round
// trip for asks named RUN/STOP (two for a run with a long meta), and two
// more for any other, found in the odd-ask hash of its shard (tags[i];
// every shard's without tags). An ask that is not there is the zero Ask
// at its place.
func (s *Store) asksOf(ctx context.Context, ids, tags []string) ([]store.Ask, error) {
	out := make([]store.Ask, len(ids))
	want := map[string][]int{} // run → the places of ids to look for in it
	for i, id := range ids {
		if run, ok := runOfAsk(id); ok {
			want[run] = append(want[run], i)
		}
	}
	if err := s.findAsks(ctx, ids, want, out); err != nil {
		return nil, err
	}
	// Not found where the id points: an odd ask (or one that is gone).
	var lost []int
	for i := range ids {
		if out[i].ID == "" {
			lost = append(lost, i)
		}
	}
	if len(lost) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	type lookup struct {
		at  int
		cmd *redis.StringCmd
	}
	var looks []lookup
	for _, i := range lost {
		if tags != nil {
			looks = append(looks, lookup{i, pipe.HGet(ctx, oddAsksKey(tags[i]), ids[i])})
			continue
		}
		for sh := range s.shards {
			looks = append(looks, lookup{i, pipe.HGet(ctx, oddAsksKey(s.tag(sh)), ids[i])})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	want = map[string][]int{}
	for _, l := range looks {
		if run, err := l.cmd.Result(); err == nil {
			want[run] = append(want[run], l.at)
		}
	}
	if err := s.findAsks(ctx, ids, want, out); err != nil {
		return nil, err
	}
	return out, nil
}

// findAsks reads the runs of want and puts each ask of ids they hold in
// out.
func (s *Store) findAsks(ctx context.Context, ids []string, want map[string][]int, out []store.Ask) error {
	if len(want) == 0 {
		return nil
	}
	runs := slices.Sorted(maps.Keys(want))
	keys := make([]string, len(runs))
	for i, r := range runs {
		keys[i] = runKey(s.runTag(r), r)
	}
	heads, err := s.readHeads(ctx, keys)
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	for i, v := range heads {
		if v == "" {
			continue
		}
		h, err := decodeHead(runs[i], v)
		if err != nil {
			return err
		}
		for _, at := range want[runs[i]] {
			for _, a := range h.asks {
				if a.ID == ids[at] {
					out[at] = a
				}
			}
		}
	}
	return nil
}

// journalScript reads a run's journal at one instant (a commit may move
// the tail to the list in between two plain reads). KEYS: 1 run, 2
// journal. Returns the run's header and meta, its tail, then the list's
// elements; {} if there is no run.
var journalScript = redis.NewScript(journalScriptSrc)

const journalScriptSrc = `
local hdr = redis.call('GETRANGE', KEYS[1], 0, 57)
if #hdr < 58 then return {} end
local function u32(at)
  local b1, b2, b3, b4 = string.byte(hdr, at, at + 3)
  return ((b1 * 256 + b2) * 256 + b3) * 256 + b4
end
local out = {redis.call('GETRANGE', KEYS[1], 0, u32(51) - 1), redis.call('GETRANGE', KEYS[1], u32(55), -1)}
for _, c in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do out[#out + 1] = c end
return out
`

// Journal implements store.Store.
func (s *Store) Journal(ctx context.Context, runID string, after int64, limit int) ([]store.JournalRecord, error) {
	tag := s.runTag(runID)
	keys := []string{runKey(tag, runID), journalKey(tag, runID)}
	cmd := redis.NewCmd(ctx, evalArgs("evalsha", journalScript.Hash(), keys, nil)...)
	if err := s.batch.do(ctx, cmd); err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = journalScript.Eval(ctx, s.rdb, keys)
	}
	reply, err := cmd.Slice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(movingErr(err)))
	}
	if len(reply) == 0 {
		return nil, nil
	}
	head, parts, ok := journalParts(reply)
	if !ok {
		return nil, fmt.Errorf("redisstore: run %s is damaged: its journal", runID)
	}
	h, err := decodeHead(runID, head)
	if err != nil {
		return nil, err
	}
	return decodeJournal(h, parts, max(after, 0), limit)
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
		var active []*state
		var reads []rangeRead
		for _, x := range st {
			if x.want {
				active = append(active, x)
				reads = append(reads, rangeRead{tag: x.tag, dir: x.key, start: sc.start, stop: sc.stop, rev: sc.rev, offset: x.off, count: x.batch})
			}
		}
		if len(active) == 0 {
			break
		}
		got, err := s.readRanges(ctx, reads)
		if err != nil {
			return nil, err
		}
		for i, x := range active {
			zs := got[i]
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

// rangeRead is one index read (rangeCmd).
type rangeRead struct {
	tag, dir, start, stop string
	rev                   bool
	offset, count         int64
}

// readRanges reads indexes in one pipeline, sending the range script
// again to a node that lacks it.
func (s *Store) readRanges(ctx context.Context, reads []rangeRead) ([][]redis.Z, error) {
	cmds := make([]*redis.Cmd, len(reads))
	pipe := s.rdb.Pipeline()
	for i, r := range reads {
		cmds[i] = rangeCmd(ctx, pipe, r.tag, r.dir, r.start, r.stop, r.rev, r.offset, r.count)
	}
	_, _ = pipe.Exec(ctx) // each command holds its own error
	var again []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe = s.rdb.Pipeline()
		for _, i := range again {
			r, rev := reads[i], "0"
			if r.rev {
				rev = "1"
			}
			cmds[i] = rangeScript.Eval(ctx, pipe, []string{r.dir}, r.start, r.stop, rev, r.offset, r.count, r.tag)
		}
		_, _ = pipe.Exec(ctx)
	}
	out := make([][]redis.Z, len(reads))
	for i, c := range cmds {
		zs, err := rangeReply(c)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", unavailable(movingErr(err)))
		}
		out[i] = zs
	}
	return out, nil
}

// registry reads the states each shard has seen (the fields of its
// counts, prefix "r:" for runs, "a:" for asks), for a query that names
// none.
func (s *Store) registry(ctx context.Context, prefix string) ([][]string, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, s.shards)
	for sh := range s.shards {
		cmds[sh] = pipe.HKeys(ctx, countsKey(s.tag(sh)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	out := make([][]string, s.shards)
	for sh, cmd := range cmds {
		for _, f := range cmd.Val() {
			if st, ok := strings.CutPrefix(f, prefix); ok {
				out[sh] = append(out[sh], st)
			}
		}
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
	if len(states) == 0 {
		// Every state the shard has seen: no index holds all runs.
		if seenStates, err = s.registry(ctx, "r:"); err != nil {
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
			if q.Requester != "" {
				srcs = append(srcs, source{runReqKey(tag, q.Requester, st), tag})
			} else {
				srcs = append(srcs, source{runStateKey(tag, st), tag})
			}
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
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = runKey(e.tag, e.id())
	}
	var heads []string
	if len(entries) > 0 {
		if heads, err = s.readHeads(ctx, keys); err != nil {
			return nil, "", fmt.Errorf("redisstore: %w", err)
		}
	}
	runs := make([]store.Run, 0, len(entries))
	for i, e := range entries {
		if heads[i] == "" {
			continue // gone since the index was read
		}
		h, err := decodeHead(e.id(), heads[i])
		if err != nil {
			return nil, "", err
		}
		r := h.run // without Data: a listing may leave it out
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
		if seenStates, err = s.registry(ctx, "a:"); err != nil {
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
	ids, tags := make([]string, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		ids[i], tags[i] = e.id(), e.tag
	}
	rows, err := s.asksOf(ctx, ids, tags)
	if err != nil {
		return nil, "", err
	}
	asks := make([]store.Ask, 0, len(entries))
	for _, a := range rows {
		// The index and the run are read apart: an ask that moved on
		// since no longer matches.
		if a.ID != "" && askMatches(a, q, states, auds) {
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

// listRunAsks lists one run's asks: the run keeps them.
func (s *Store) listRunAsks(ctx context.Context, q store.AskQuery) ([]store.Ask, string, error) {
	heads, err := s.readHeads(ctx, []string{runKey(s.runTag(q.RunID), q.RunID)})
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: %w", err)
	}
	if heads[0] == "" {
		return nil, "", nil
	}
	h, err := decodeHead(q.RunID, heads[0])
	if err != nil {
		return nil, "", err
	}
	states, auds := uniq(q.States), uniq(q.Audiences)
	var all []store.Ask
	for _, a := range h.asks {
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

// Counts implements store.Store: each shard's counts hash, which every
// commit keeps (HINCRBY as runs and asks change state), in one pipelined
// round trip; nothing is scanned.
func (s *Store) Counts(ctx context.Context) (store.Counts, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, s.shards)
	for sh := range s.shards {
		cmds[sh] = pipe.HGetAll(ctx, countsKey(s.tag(sh)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return store.Counts{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	out := store.Counts{Runs: map[string]int64{}, Asks: map[string]int64{}}
	for _, cmd := range cmds {
		for f, v := range cmd.Val() {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return store.Counts{}, fmt.Errorf("redisstore: a count %s=%q is damaged", f, v)
			}
			if st, ok := strings.CutPrefix(f, "r:"); ok {
				out.Runs[st] += n
			} else if st, ok := strings.CutPrefix(f, "a:"); ok {
				out.Asks[st] += n
			}
		}
	}
	return out, nil
}
