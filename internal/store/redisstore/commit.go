package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// commitScript applies one transition. Redis does not roll a script back,
// so every precondition is checked before the first write, in this order:
// the run's version (a create: the run must not exist), the deadline by
// the server's clock (TIME), the journal's first prev hash and seq against
// the stored head, and that every index bucket the script may write is
// on this node (indexLua). Every key in KEYS carries the run's hash tag
// (one slot); so do the index buckets, found in their directories.
//
// Go computes the whole new run but its journal tail from the version it
// read (or last wrote): a run's value at a version never changes, so the
// version check makes everything Go derived from it exact — the asks it
// keeps, the index entries to move, the counts.
//
// KEYS: 1 run, 2 journal list, 3 counts, 4 bseq, 5 odd asks, then the
// index directories the ops name and the runs new odd asks look like
// theirs, then the work keys (work.go).
//
// ARGV: 1 expected version (8 bytes big-endian; "" to create), 2 deadline
// in µs ("" = none), 3 the first record's prev hash as the header keeps it
// (33 bytes; "" for no records), 4 the seq before the first record (8
// bytes), 5 the run's new header, meta and data, 6 the new records
// (appendGroup), 7 the shard's tag, 8 the bucket split size, 9 the new
// version in decimal (for the hint), 10 the number of KEYS after the
// first five, 11
// the number of count changes, then field, delta pairs, then the number of
// index ops, then 4 per op:
// "a"dd or "r"emove, its directory's KEYS index, score, member; then the
// number of new asks, then 3 per ask: its id, the run's id if it is odd
// (not named RUN/STOP after its run, so recorded in the odd-ask hash)
// else "", the KEYS index of the run it names ("RUN/…", in this shard)
// or 0; then the work section.
//
// Returns 0 written, 1 version conflict, 2 deadline passed, 3 the journal
// does not follow the stored head, 5 an index bucket is not on this node
// (the slot is moving between cluster nodes; nothing was written).
var commitScript = redis.NewScript(commitScriptSrc)

const commitScriptSrc = `
local hdr = redis.call('GETRANGE', KEYS[1], 0, 57)
if ARGV[1] == '' then
  if hdr ~= '' then return 1 end
elseif #hdr < 58 or string.sub(hdr, 2, 9) ~= ARGV[1] then
  return 1
end
if ARGV[2] ~= '' then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) >= tonumber(ARGV[2]) then return 2 end
end
if ARGV[1] ~= '' and ARGV[3] ~= '' and (string.sub(hdr, 18, 50) ~= ARGV[3] or string.sub(hdr, 10, 17) ~= ARGV[4]) then
  return 3
end
local TAG, SEQ, SPLIT = ARGV[7], KEYS[4], tonumber(ARGV[8])
` + indexLua + `
local nc = tonumber(ARGV[11])
local o = 13 + 2 * nc
local no = tonumber(ARGV[o - 1])
for i = 0, no - 1 do
  local a = o + 4 * i
  check(KEYS[tonumber(ARGV[a + 1])], ARGV[a + 2], ARGV[a] == 'a')
end
if not checked() then return 5 end
-- An ask id names one ask in the shard: a new one must not be another
-- run's odd ask, nor, when odd, look like an ask of a run here.
local q = o + 4 * no
local nn = tonumber(ARGV[q])
for i = 0, nn - 1 do
  local a = q + 1 + 3 * i
  if redis.call('HEXISTS', KEYS[5], ARGV[a]) == 1 then return 1 end
  if ARGV[a + 2] ~= '0' and redis.call('EXISTS', KEYS[tonumber(ARGV[a + 2])]) == 1 then return 1 end
end

-- Every check passed: write.
local tail = ''
if ARGV[1] ~= '' then
  local b1, b2, b3, b4 = string.byte(hdr, 55, 58)
  tail = redis.call('GETRANGE', KEYS[1], ((b1 * 256 + b2) * 256 + b3) * 256 + b4, -1)
end
if ARGV[6] ~= '' then
  -- The group before ends with the stored head (journal.go).
  local add = ARGV[6]
  if ARGV[1] ~= '' and string.byte(hdr, 18) == 1 and (#tail > 0 or redis.call('EXISTS', KEYS[2]) == 1) then
    add = string.sub(hdr, 19, 50) .. add
  end
  if #tail + #add > ` + spillAt + ` then
    redis.call('RPUSH', KEYS[2], tail .. add)
    tail = ''
  else
    tail = tail .. add
  end
end
redis.call('SET', KEYS[1], ARGV[5] .. tail)
for i = 0, nc - 1 do
  redis.call('HINCRBY', KEYS[3], ARGV[12 + 2 * i], ARGV[13 + 2 * i])
end
for i = 0, no - 1 do
  local a = o + 4 * i
  if ARGV[a] == 'a' then
    idxAdd(KEYS[tonumber(ARGV[a + 1])], ARGV[a + 2], ARGV[a + 3])
  else
    idxRem(KEYS[tonumber(ARGV[a + 1])], ARGV[a + 2], ARGV[a + 3])
  end
end
maintain()
for i = 0, nn - 1 do
  local a = q + 1 + 3 * i
  if ARGV[a + 1] ~= '' then redis.call('HSET', KEYS[5], ARGV[a], ARGV[a + 1]) end
end
local kw, w = 6 + tonumber(ARGV[10]), q + 1 + 3 * nn
` + commitWorkSrc + `
return 0
`

// Request keys. The key lives in the shard of the request key, not of the
// run: a retried create carries a new run id, which may hash to another
// shard. So an idempotent create claims the key first (one slot), then
// commits (the run's slot), and gives the claim back if the commit was
// refused. A claim whose run never appears (its creator died between the
// two steps) is taken over once it is older than orphanAfter.
var claimScript = redis.NewScript(claimScriptSrc)

const claimScriptSrc = `
local cur = redis.call('HMGET', KEYS[1], 'run', 'at')
if cur[1] then return {cur[1], cur[2] or '0'} end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'run', ARGV[1], 'at', t[1])
return 1
`

var takeoverScript = redis.NewScript(takeoverScriptSrc)

const takeoverScriptSrc = `
if redis.call('HGET', KEYS[1], 'run') ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'run', ARGV[2], 'at', t[1])
return 1
`

var releaseScript = redis.NewScript(releaseScriptSrc)

const releaseScriptSrc = `
if redis.call('HGET', KEYS[1], 'run') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`

// orphanAfter is how old a claim on a request key must be, with no run
// behind it, before another create may take it over.
const orphanAfter = time.Minute

// Commit implements store.Store.
func (s *Store) Commit(ctx context.Context, c store.Commit) error {
	if err := store.CheckCommit(c); err != nil {
		return err
	}
	p, err := s.prepare(c)
	if err != nil {
		return err
	}
	claimed := false
	if c.ExpectVersion == 0 && c.RequestKey != "" {
		if claimed, err = s.claim(ctx, c.RequestKey, c.Run.ID); err != nil {
			return err
		}
	}
	err = s.commit(ctx, p)
	if claimed && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrDeadline)) {
		// Nothing was written: give the key back. (After an error of
		// unknown outcome the claim stays, and points at the run.)
		_ = releaseScript.Run(context.WithoutCancel(ctx), s.rdb, []string{s.reqKey(c.RequestKey)}, c.Run.ID).Err()
	}
	return err
}

// prepared is a commit encoded for the script, but for what depends on
// the run as stored (prior).
type prepared struct {
	c    store.Commit
	tag  string
	asks []store.Ask // last write of each id wins, as in memstore
}

// prior is the run as stored at the version a commit follows (exists is
// false for a create): all the new value is computed from.
type prior struct {
	exists    bool
	version   int64
	state     string
	requester string
	created   time.Time
	asks      []store.Ask // every ask of the run, in the order kept
	seq       int64       // the journal's last seq and head
	head      string
	base      int64     // the journal's seq before its first record
	firstPrev string    // the first record's prev hash
	digest    string    // the journal's digest (packPayload)
	epoch     time.Time // the journal's epoch (appendGroup)
}

func (s *Store) prepare(c store.Commit) (*prepared, error) {
	p := &prepared{c: c, tag: s.runTag(c.Run.ID)}
	seen := map[string]int{}
	for _, a := range c.Asks {
		if i, ok := seen[a.ID]; ok {
			p.asks[i] = a
			continue
		}
		seen[a.ID] = len(p.asks)
		p.asks = append(p.asks, a)
	}
	for i, r := range c.Journal {
		if i > 0 && r.Seq != c.Journal[i-1].Seq+1 {
			return nil, fmt.Errorf("%w: journal record %d follows record %d", store.ErrInvalid, r.Seq, c.Journal[i-1].Seq)
		}
	}
	if _, ok := packHead(c.Run.JournalHead); !ok {
		return nil, fmt.Errorf("%w: journal head %q is not a sha256 digest", store.ErrInvalid, c.Run.JournalHead)
	}
	if len(c.Journal) > 0 && c.ExpectVersion != 0 {
		// It must be the stored head: a digest (a create's may be anything).
		if _, ok := packHead(c.Journal[0].PrevHash); !ok {
			return nil, fmt.Errorf("%w: journal record %d's prev hash %q is not a sha256 digest", store.ErrInvalid, c.Journal[0].Seq, c.Journal[0].PrevHash)
		}
	}
	return p, nil
}

func (s *Store) commit(ctx context.Context, p *prepared) error {
	c := p.c
	var pr prior
	switch {
	case c.ExpectVersion == 0:
		// A create has nothing to read: the script refuses it if the run
		// is there.
	case s.written.prior(c.Run.ID, c.ExpectVersion, &pr):
		// This store wrote the version the commit follows: that is what
		// Redis holds, unless another writer moved the run on since (the
		// script refuses: version conflict).
	default:
		var err error
		if pr, err = s.readPrior(ctx, c.Run.ID, p.tag); err != nil {
			return err
		}
		if !pr.exists || pr.version != c.ExpectVersion {
			s.written.forget(c.Run.ID)
			return store.ErrConflict
		}
	}
	keys, args, w, err := s.scriptArgs(p, pr)
	if err != nil {
		return err
	}
	code, err := s.runCommit(ctx, keys, args)
	if err != nil {
		s.written.forget(c.Run.ID)
		return fmt.Errorf("redisstore: commit: %w", unavailable(err))
	}
	switch code {
	case 0:
		s.written.remember(c.Run.ID, w)
		return nil
	case 1:
		s.written.forget(c.Run.ID)
		return store.ErrConflict
	case 2:
		return store.ErrDeadline
	case 3:
		s.written.forget(c.Run.ID)
		return fmt.Errorf("%w: the journal does not follow the run's stored head", store.ErrConflict)
	case 5:
		return fmt.Errorf("redisstore: commit: %w: the run's slot is moving between Redis Cluster nodes", store.ErrUnavailable)
	}
	return fmt.Errorf("redisstore: commit script answered %d", code)
}

// maxWritten bounds the runs whose last write a store remembers.
const maxWritten = 8192

// writtenRuns remembers, per run, what the last version this store
// committed holds but for data and journal, so the next commit of that
// run needs no read first. The script's version check makes it exact: a
// run's value at a version never changes.
type writtenRuns struct {
	mu   sync.Mutex
	runs map[string]*prior
}

// prior fills pr with what this store last wrote of run id, if that is
// version v.
func (w *writtenRuns) prior(id string, v int64, pr *prior) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.runs[id]
	if !ok || r.version != v {
		return false
	}
	*pr = *r
	return true
}

// remember records what a commit wrote.
func (w *writtenRuns) remember(id string, r *prior) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs == nil {
		w.runs = map[string]*prior{}
	}
	if _, ok := w.runs[id]; !ok && len(w.runs) >= maxWritten {
		for old := range w.runs { // evict one, any
			delete(w.runs, old)
			break
		}
	}
	w.runs[id] = r
}

func (w *writtenRuns) forget(runID string) {
	w.mu.Lock()
	delete(w.runs, runID)
	w.mu.Unlock()
}

// runCommit runs the commit script in a shared pipeline (EVALSHA; the
// script is loaded at start-up, and again here if Redis lost it).
func (s *Store) runCommit(ctx context.Context, keys []string, args []any) (int, error) {
	cmd := redis.NewCmd(ctx, evalArgs("evalsha", commitScript.Hash(), keys, args)...)
	if err := s.batch.do(ctx, cmd); err != nil {
		return 0, err
	}
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = commitScript.Eval(ctx, s.rdb, keys, args...)
	}
	n, err := cmd.Int()
	return n, movingErr(err)
}

// movingErr marks as unavailable the error of a script that touched a key
// of a slot being migrated between cluster nodes: it stopped there,
// before its first write, and the same call may succeed once the slot has
// moved.
func movingErr(err error) error {
	if err != nil && strings.Contains(err.Error(), "non local key") {
		return fmt.Errorf("%w: the slot is moving: %w", store.ErrUnavailable, err)
	}
	return err
}

// readPrior reads the run as stored.
func (s *Store) readPrior(ctx context.Context, id, tag string) (prior, error) {
	heads, err := s.readHeads(ctx, []string{runKey(tag, id)})
	if err != nil {
		return prior{}, fmt.Errorf("redisstore: commit: %w", err)
	}
	if heads[0] == "" {
		return prior{}, nil
	}
	h, err := decodeHead(id, heads[0])
	if err != nil {
		return prior{}, err
	}
	return priorOf(h), nil
}

func priorOf(h runHead) prior {
	return prior{exists: true, version: h.run.Version, state: h.run.State, requester: h.run.Requester, created: h.run.CreatedAt,
		asks: h.asks, seq: h.run.JournalSeq, head: h.run.JournalHead, base: h.base, firstPrev: h.firstPrev, digest: h.journalDigest,
		epoch: h.epoch}
}

// readHeads reads the header and meta of each run key, pipelined: a
// value's first headRead bytes, and the rest of its meta in a second
// round trip for the few whose meta is longer. A run that is not there
// reads as "".
func (s *Store) readHeads(ctx context.Context, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	cmds := make([]redis.Cmder, len(keys))
	reads := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		reads[i] = redis.NewStringCmd(ctx, "getrange", k, 0, headRead-1)
		cmds[i] = reads[i]
	}
	if err := s.batch.do(ctx, cmds...); err != nil {
		return nil, unavailable(err)
	}
	var more []int
	for i, cmd := range reads {
		v, err := cmd.Result()
		if err != nil {
			return nil, unavailable(err)
		}
		out[i] = v
		if n := headLen(v); n > len(v) {
			more = append(more, i)
		}
	}
	if len(more) == 0 {
		return out, nil
	}
	cmds, reads = cmds[:0], reads[:0]
	for _, i := range more {
		c := redis.NewStringCmd(ctx, "getrange", keys[i], headRead, headLen(out[i])-1)
		reads, cmds = append(reads, c), append(cmds, c)
	}
	if err := s.batch.do(ctx, cmds...); err != nil {
		return nil, unavailable(err)
	}
	for j, i := range more {
		v, err := reads[j].Result()
		if err != nil {
			return nil, unavailable(err)
		}
		out[i] += v
	}
	return out, nil
}

// indexOp is one index entry to add or remove.
type indexOp struct {
	add           bool
	dir           string
	score, member string
}

// scriptArgs lays out KEYS and ARGV as commitScript reads them, and what
// this store will remember having written.
func (s *Store) scriptArgs(p *prepared, pr prior) ([]string, []any, *prior, error) {
	c, tag := p.c, p.tag
	r := c.Run
	// Every ask of the run: those kept, with this commit's in their place.
	asks := slices.Clone(pr.asks)
	byID := make(map[string]int, len(asks))
	for i, a := range asks {
		byID[a.ID] = i
	}
	var ops []indexOp
	counts := map[string]int64{}
	entry := func(add bool, dirs []string, t time.Time, id string) {
		ms, member := scoreMember(t, id)
		for _, d := range dirs {
			ops = append(ops, indexOp{add, d, strconv.FormatInt(ms, 10), member})
		}
	}
	switch {
	case !pr.exists:
		entry(true, []string{runStateKey(tag, r.State), runReqKey(tag, r.Requester, r.State)}, r.CreatedAt, r.ID)
		counts["r:"+r.State]++
	case pr.state != r.State || pr.requester != r.Requester || !pr.created.Equal(r.CreatedAt):
		entry(false, []string{runStateKey(tag, pr.state), runReqKey(tag, pr.requester, pr.state)}, pr.created, r.ID)
		entry(true, []string{runStateKey(tag, r.State), runReqKey(tag, r.Requester, r.State)}, r.CreatedAt, r.ID)
		counts["r:"+pr.state]--
		counts["r:"+r.State]++
	}
	for _, a := range p.asks {
		i, had := byID[a.ID]
		if !had {
			byID[a.ID] = len(asks)
			asks = append(asks, a)
			entry(true, []string{askStateKey(tag, a.State), askAudKey(tag, a.Audience, a.State)}, a.DueAt, a.ID)
			counts["a:"+a.State]++
			continue
		}
		old := asks[i]
		asks[i] = a
		if old.State == a.State && old.Audience == a.Audience && old.DueAt.Equal(a.DueAt) {
			continue
		}
		entry(false, []string{askStateKey(tag, old.State), askAudKey(tag, old.Audience, old.State)}, old.DueAt, a.ID)
		entry(true, []string{askStateKey(tag, a.State), askAudKey(tag, a.Audience, a.State)}, a.DueAt, a.ID)
		counts["a:"+old.State]--
		counts["a:"+a.State]++
	}
	next := prior{exists: true, version: r.Version, state: r.State, requester: r.Requester, created: r.CreatedAt, asks: asks,
		seq: r.JournalSeq, head: r.JournalHead, base: pr.base, firstPrev: pr.firstPrev, digest: pr.digest, epoch: pr.epoch}
	switch {
	case !pr.exists:
		next.digest, next.epoch = r.PlanDigest, r.CreatedAt
		// The journal starts where the create's records do, or, with
		// none, at the head the run was created with (a chain begun
		// elsewhere): later records are read back from there.
		next.base, next.firstPrev = r.JournalSeq, r.JournalHead
		if len(c.Journal) > 0 {
			next.base, next.firstPrev = c.Journal[0].Seq-1, c.Journal[0].PrevHash
		}
	case len(c.Journal) == 0 && (r.JournalSeq != pr.seq || r.JournalHead != pr.head):
		// The head is the last record's hash, which the store keeps
		// there alone (journal.go): it moves with records only.
		return nil, nil, nil, fmt.Errorf("%w: run %s's journal head changes without a record", store.ErrInvalid, r.ID)
	}
	value, err := packRun(r, asks, next.base, next.firstPrev, next.digest, next.epoch)
	if err != nil {
		return nil, nil, nil, err
	}
	size := 0
	for _, rec := range c.Journal {
		size += 48 + len(rec.Actor) + len(rec.Kind) + len(rec.Payload)
	}
	group, err := appendGroup(make([]byte, 0, size), r.ID, c.Journal, next.digest, next.epoch)
	if err != nil {
		return nil, nil, nil, err
	}

	keys := []string{runKey(tag, r.ID), journalKey(tag, r.ID), countsKey(tag), bucketSeqKey(tag), oddAsksKey(tag)}
	keyAt := map[string]int{}
	key := func(k string) int {
		if _, ok := keyAt[k]; !ok {
			keys = append(keys, k)
			keyAt[k] = len(keys) // KEYS are 1-based
		}
		return keyAt[k]
	}
	for _, op := range ops {
		key(op.dir)
	}
	type newAsk struct {
		id, oddOf string
		looksLike int
	}
	var fresh []newAsk
	for _, a := range asks[len(pr.asks):] {
		n := newAsk{id: a.ID}
		if _, named := askStop(r.ID, a.ID); !named {
			n.oddOf = r.ID
			if other, ok := runOfAsk(a.ID); ok && other != r.ID && s.runTag(other) == tag {
				n.looksLike = key(runKey(tag, other))
			}
		}
		fresh = append(fresh, n)
	}
	expect, deadline, firstPrev, seqBefore := "", "", "", ""
	if c.ExpectVersion != 0 {
		expect = be64(c.ExpectVersion)
	}
	if !c.Deadline.IsZero() {
		// The script compares whole microseconds (the resolution of TIME):
		// now < deadline ⇔ now_µs < ⌈deadline_ns / 1000⌉.
		us := c.Deadline.UnixMicro()
		if c.Deadline.Nanosecond()%1000 != 0 {
			us++
		}
		deadline = strconv.FormatInt(us, 10)
	}
	if len(c.Journal) > 0 {
		h, _ := packHead(c.Journal[0].PrevHash)
		firstPrev, seqBefore = string(h[:]), be64(c.Journal[0].Seq-1)
	}
	maps.DeleteFunc(counts, func(_ string, n int64) bool { return n == 0 }) // a move within a state
	args := make([]any, 0, 16+2*len(counts)+4*len(ops)+8*len(c.Enqueue))
	args = append(args, expect, deadline, firstPrev, seqBefore, value, group, tag, s.bucketSplit,
		strconv.FormatInt(r.Version, 10), len(keys)-5, len(counts))
	for _, f := range slices.Sorted(maps.Keys(counts)) {
		args = append(args, f, counts[f])
	}
	args = append(args, len(ops))
	for _, op := range ops {
		kind := "r"
		if op.add {
			kind = "a"
		}
		args = append(args, kind, keyAt[op.dir], op.score, op.member)
	}
	args = append(args, len(fresh))
	for _, n := range fresh {
		args = append(args, n.id, n.oddOf, n.looksLike)
	}
	keys, args = s.commitWork(keys, args, p)
	return keys, args, &next, nil
}

func be64(v int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return string(b[:])
}

// claim takes the request key for runID. It reports whether this call
// made the claim (and so must give it back if the commit is refused).
func (s *Store) claim(ctx context.Context, key, runID string) (bool, error) {
	k := s.reqKey(key)
	for range 3 {
		res, err := claimScript.Run(ctx, s.rdb, []string{k}, runID).Result()
		if err != nil {
			return false, fmt.Errorf("redisstore: claiming request key: %w", unavailable(err))
		}
		held, ok := res.([]any)
		if !ok || len(held) != 2 {
			return true, nil
		}
		holder := str(held[0])
		at, _ := strconv.ParseInt(str(held[1]), 10, 64)
		if holder == runID {
			return false, nil // our own claim, from an earlier try
		}
		pipe := s.rdb.Pipeline()
		mine := pipe.Exists(ctx, runKey(s.runTag(runID), runID))
		theirs := pipe.Exists(ctx, runKey(s.runTag(holder), holder))
		if _, err := pipe.Exec(ctx); err != nil {
			return false, fmt.Errorf("redisstore: claiming request key: %w", unavailable(err))
		}
		switch {
		case mine.Val() > 0:
			return false, store.ErrConflict // as memstore: an existing run conflicts first
		case theirs.Val() > 0:
			return false, &store.DuplicateError{RunID: holder}
		}
		// The holder's run is not there yet: its commit is in flight, or
		// its creator died between claim and commit.
		now, err := s.Now(ctx)
		if err != nil {
			return false, err
		}
		if now.Sub(time.Unix(at, 0)) < orphanAfter {
			return false, &store.DuplicateError{RunID: holder}
		}
		took, err := takeoverScript.Run(ctx, s.rdb, []string{k}, holder, runID).Int()
		if err != nil {
			return false, fmt.Errorf("redisstore: claiming request key: %w", unavailable(err))
		}
		if took == 1 {
			return true, nil
		}
	}
	return false, fmt.Errorf("%w: the request key %q is contended", store.ErrConflict, key)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
