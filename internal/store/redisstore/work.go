package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// Work queues (store.WorkQueues), per shard, under the shard's hash tag
// so a run's commit writes its entries in the same script and slot:
//
//	TAG:wk          hash  id → run id "\n" queue   every entry
//	TAG:wc          hash  id → owner               claimed entries
//	TAG:wb          hash  id → body                entries with a body
//	TAG:wq          set   queues with waiting entries in this shard
//	TAG:wr:QUEUE    zset  waiting ids by enqueue time (ms)
//
// An entry's id must be unique within its shard: callers use ids that
// start with the run id. Hints go out on one channel (PREFIX:hints) with
// classic pub/sub, which a Redis Cluster broadcasts to every node:
// "r VERSION ORIGIN RUNKEY" after each commit, "q QUEUE" when work waits.

func workKeys(tag string) (wk, wc, wb, wq string) {
	return tag + ":wk", tag + ":wc", tag + ":wb", tag + ":wq"
}

func readyKey(tag, queue string) string { return tag + ":wr:" + queue }

func (s *Store) hintChannel() string { return s.prefix + ":hints" }

// commitWork appends the commit's work section to the script's KEYS and
// ARGV (see commitScript): the hint channel, the enqueued entries and the
// finished ones.
func (s *Store) commitWork(keys []string, args []any, p *prepared) ([]string, []any) {
	c, tag := p.c, p.tag
	wk, wc, wb, wq := workKeys(tag)
	keys = append(keys, wk, wc, wb, wq)
	args = append(args, s.hintChannel(), len(c.Enqueue))
	score := strconv.FormatInt(c.Run.UpdatedAt.UnixMilli(), 10)
	for _, w := range c.Enqueue {
		keys = append(keys, readyKey(tag, w.Queue))
		args = append(args, w.ID, w.RunID+"\n"+w.Queue, w.Owner, w.Body, score, w.Queue)
	}
	args = append(args, len(c.Finish))
	for _, r := range c.Finish {
		keys = append(keys, readyKey(tag, r.Queue))
		args = append(args, r.ID, r.Queue)
	}
	origin := c.Origin
	if origin == "" {
		origin = "-"
	}
	return keys, append(args, origin)
}

// commitWorkSrc is the end of commitScript: kw is the first work key, w
// the first work argument.
const commitWorkSrc = `
local ne = tonumber(ARGV[w + 1])
local f = w + 2 + 6 * ne
local nf = tonumber(ARGV[f])
-- Finished first: a commit may finish an id and enqueue it anew (a lease
-- that moved, a step leased from its tool queue into the lease queue).
for i = 0, nf - 1 do
  local id, q = ARGV[f + 1 + 2 * i], ARGV[f + 2 + 2 * i]
  if redis.call('HDEL', KEYS[kw], id) == 1 then
    redis.call('HDEL', KEYS[kw + 1], id)
    redis.call('HDEL', KEYS[kw + 2], id)
    if redis.call('ZREM', KEYS[kw + 4 + ne + i], id) == 1 and redis.call('ZCARD', KEYS[kw + 4 + ne + i]) == 0 then
      redis.call('SREM', KEYS[kw + 3], q)
    end
  end
end
for i = 0, ne - 1 do
  local a = w + 2 + 6 * i
  local id = ARGV[a]
  if redis.call('HSETNX', KEYS[kw], id, ARGV[a + 1]) == 1 then
    if ARGV[a + 3] ~= '' then redis.call('HSET', KEYS[kw + 2], id, ARGV[a + 3]) end
    if ARGV[a + 2] ~= '' then
      redis.call('HSET', KEYS[kw + 1], id, ARGV[a + 2])
    else
      redis.call('ZADD', KEYS[kw + 4 + i], ARGV[a + 4], id)
      redis.call('SADD', KEYS[kw + 3], ARGV[a + 5])
      redis.call('PUBLISH', ARGV[w], 'q ' .. ARGV[a + 5])
    end
  end
end
redis.call('PUBLISH', ARGV[w], 'r ' .. ARGV[9] .. ' ' .. ARGV[f + 1 + 2 * nf] .. ' ' .. KEYS[1])
`

// claimWorkScript claims up to ARGV[2] waiting ids of one queue in one
// shard. KEYS: 1 wr:QUEUE, 2 wk, 3 wc, 4 wb, 5 wq; ARGV: 1 owner, 2 n,
// 3 queue. Returns id, run id, body triples.
var claimWorkScript = redis.NewScript(claimWorkScriptSrc)

const claimWorkScriptSrc = `
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local v = redis.call('HGET', KEYS[2], id)
  if v then
    redis.call('HSET', KEYS[3], id, ARGV[1])
    out[#out + 1] = id
    out[#out + 1] = v
    out[#out + 1] = redis.call('HGET', KEYS[4], id) or ''
  end
end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('SREM', KEYS[5], ARGV[3]) end
return out
`

// releaseWorkScript puts ids owned by ARGV[1] back to waiting. KEYS: 1 wk,
// 2 wc, 3 wq, then one wr:QUEUE per id; ARGV: 1 owner, 2 score, 3 hint
// channel, then id, queue pairs.
var releaseWorkScript = redis.NewScript(releaseWorkScriptSrc)

const releaseWorkScriptSrc = `
local n = 0
for i = 4, #ARGV, 2 do
  local id, q = ARGV[i], ARGV[i + 1]
  local v = redis.call('HGET', KEYS[1], id)
  -- Only the owner's claim, and only in the queue named: a step's tool
  -- entry and its lease entry share an id.
  if v and string.sub(v, -#q - 1) == '\n' .. q and redis.call('HGET', KEYS[2], id) == ARGV[1] then
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZADD', KEYS[4 + (i - 4) / 2], ARGV[2], id)
    redis.call('SADD', KEYS[3], q)
    redis.call('PUBLISH', ARGV[3], 'q ' .. q)
    n = n + 1
  end
end
return n
`

// finishWorkScript removes ids. KEYS: 1 wk, 2 wc, 3 wb, 4 wq, then one
// wr:QUEUE per id; ARGV: id, queue pairs.
var finishWorkScript = redis.NewScript(finishWorkScriptSrc)

const finishWorkScriptSrc = `
for i = 1, #ARGV, 2 do
  local id, q = ARGV[i], ARGV[i + 1]
  if redis.call('HDEL', KEYS[1], id) == 1 then
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    if redis.call('ZREM', KEYS[5 + (i - 1) / 2], id) == 1 and redis.call('ZCARD', KEYS[5 + (i - 1) / 2]) == 0 then
      redis.call('SREM', KEYS[4], q)
    end
  end
end
return 0
`

// claimedWorkScript lists a shard's claimed entries. KEYS: 1 wc, 2 wk.
// Returns id, owner, run id "\n" queue triples.
var claimedWorkScript = redis.NewScript(claimedWorkScriptSrc)

const claimedWorkScriptSrc = `
local c = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #c, 2 do
  out[#out + 1] = c[i]
  out[#out + 1] = c[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], c[i]) or ''
end
return out
`

// announceScript records what a replica serves until the store's clock
// passes ARGV[2] ms from now. KEYS: 1 served; ARGV: 1 replica, 2 ttl ms,
// 3 queues (newline-separated).
var announceScript = redis.NewScript(announceScriptSrc)

const announceScriptSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], (now + tonumber(ARGV[2])) .. '\n' .. ARGV[3])
return 0
`

// servedScript lists the live announcements and drops ones lapsed for
// over a minute. KEYS: 1 served. Returns name, queues pairs.
var servedScript = redis.NewScript(servedScriptSrc)

const servedScriptSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local nl = string.find(all[i + 1], '\n', 1, true)
  local until_ms = tonumber(string.sub(all[i + 1], 1, nl - 1))
  if until_ms > now then
    out[#out + 1] = all[i]
    out[#out + 1] = string.sub(all[i + 1], nl + 1)
  elseif until_ms + 60000 < now then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return out
`

// workScriptSrcs are the work scripts' sources (a test reads them).
var workScriptSrcs = []string{ensureWorkScriptSrc, claimWorkScriptSrc, releaseWorkScriptSrc, finishWorkScriptSrc, claimedWorkScriptSrc, announceScriptSrc, servedScriptSrc}

var workScripts = []*redis.Script{ensureWorkScript, claimWorkScript, releaseWorkScript, finishWorkScript, claimedWorkScript, announceScript, servedScript}

func (s *Store) servedKey() string { return s.prefix + ":served" }

// ensureWorkScript adds entries a shard does not hold yet. KEYS: 1 wk,
// 2 wc, 3 wb, 4 wq, then one wr:QUEUE per entry; ARGV: 1 hint channel,
// then id, "run\nqueue", owner, body, score, queue per entry. Returns how
// many it added.
var ensureWorkScript = redis.NewScript(ensureWorkScriptSrc)

const ensureWorkScriptSrc = `
local n = 0
for i = 0, (#ARGV - 1) / 6 - 1 do
  local a = 2 + 6 * i
  local id = ARGV[a]
  if redis.call('HSETNX', KEYS[1], id, ARGV[a + 1]) == 1 then
    n = n + 1
    if ARGV[a + 3] ~= '' then redis.call('HSET', KEYS[3], id, ARGV[a + 3]) end
    if ARGV[a + 2] ~= '' then
      redis.call('HSET', KEYS[2], id, ARGV[a + 2])
    else
      redis.call('ZADD', KEYS[5 + i], ARGV[a + 4], id)
      redis.call('SADD', KEYS[4], ARGV[a + 5])
      redis.call('PUBLISH', ARGV[1], 'q ' .. ARGV[a + 5])
    end
  end
end
return n
`

// EnsureWork implements store.WorkQueues: one script per shard.
func (s *Store) EnsureWork(ctx context.Context, ws []store.Work) (int, error) {
	byTag := map[string][]store.Work{}
	for _, w := range ws {
		if err := store.CheckWork(w.RunID, w.Ref(), w.Body); err != nil {
			return 0, err
		}
		tag := s.runTag(w.RunID)
		byTag[tag] = append(byTag[tag], w)
	}
	added := 0
	score := time.Now().UnixMilli()
	for tag, ws := range byTag {
		wk, wc, wb, wq := workKeys(tag)
		keys := []string{wk, wc, wb, wq}
		args := []any{s.hintChannel()}
		for _, w := range ws {
			keys = append(keys, readyKey(tag, w.Queue))
			args = append(args, w.ID, w.RunID+"\n"+w.Queue, w.Owner, w.Body, score, w.Queue)
		}
		n, err := ensureWorkScript.Run(ctx, s.rdb, keys, args...).Int()
		if err != nil {
			return added, fmt.Errorf("redisstore: ensuring work: %w", unavailable(err))
		}
		added += n
	}
	return added, nil
}

// ClaimWork implements store.WorkQueues: one script per shard, in one
// pipeline; entries beyond n (each shard may give up to n) are released
// at once.
func (s *Store) ClaimWork(ctx context.Context, queue, owner string, n int) ([]store.Work, error) {
	if owner == "" || n <= 0 || queue == "" {
		return nil, fmt.Errorf("redisstore: a claim needs a queue, an owner and a positive count: %w", store.ErrInvalid)
	}
	// Through the batcher: a claim script that ran is never sent again
	// (batch.go, sendOnce), or its first answer, and the entries it
	// claimed, would be lost.
	cmds := make([]*redis.Cmd, s.shards)
	cmders := make([]redis.Cmder, s.shards)
	for sh := range s.shards {
		tag := s.tag(sh)
		wk, wc, wb, wq := workKeys(tag)
		cmds[sh] = redis.NewCmd(ctx, "evalsha", claimWorkScript.Hash(), 5, readyKey(tag, queue), wk, wc, wb, wq, owner, n, queue)
		cmders[sh] = cmds[sh]
	}
	if err := s.batch.do(ctx, cmders...); err != nil {
		return nil, fmt.Errorf("redisstore: claiming work: %w", unavailable(err))
	}
	// Every shard's answer is read: a claim that failed on one shard (a
	// master failing over) still claimed on the others, and what it
	// claimed is returned with the error, or it would stay claimed and
	// offered to nobody.
	var out []store.Work
	var first error
	for sh, cmd := range cmds {
		res, err := cmd.Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			tag := s.tag(sh)
			wk, wc, wb, wq := workKeys(tag)
			res, err = claimWorkScript.Run(ctx, s.rdb, []string{readyKey(tag, queue), wk, wc, wb, wq}, owner, n, queue).Slice()
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("redisstore: claiming work: %w", unavailable(err))
			}
			continue
		}
		for i := 0; i+2 < len(res); i += 3 {
			run, q, _ := strings.Cut(str(res[i+1]), "\n")
			out = append(out, store.Work{Queue: q, ID: str(res[i]), RunID: run, Body: []byte(str(res[i+2])), Owner: owner})
		}
	}
	if len(out) > n {
		extra := out[n:]
		out = out[:n]
		refs := make([]store.WorkRef, len(extra))
		for i, w := range extra {
			refs[i] = w.Ref()
		}
		if err := s.ReleaseWork(ctx, owner, refs); err != nil {
			return out, cmp.Or(first, err)
		}
	}
	return out, first
}

// byShard groups refs by their run's shard tag.
func (s *Store) byShard(refs []store.WorkRef) map[string][]store.WorkRef {
	out := map[string][]store.WorkRef{}
	for _, r := range refs {
		tag := s.runTag(r.RunID)
		out[tag] = append(out[tag], r)
	}
	return out
}

// ReleaseWork implements store.WorkQueues.
func (s *Store) ReleaseWork(ctx context.Context, owner string, refs []store.WorkRef) error {
	if owner == "" {
		return nil
	}
	score := time.Now().UnixMilli()
	for tag, rs := range s.byShard(refs) {
		wk, wc, _, wq := workKeys(tag)
		keys := []string{wk, wc, wq}
		args := []any{owner, score, s.hintChannel()}
		for _, r := range rs {
			keys = append(keys, readyKey(tag, r.Queue))
			args = append(args, r.ID, r.Queue)
		}
		if err := releaseWorkScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
			return fmt.Errorf("redisstore: releasing work: %w", unavailable(err))
		}
	}
	return nil
}

// FinishWork implements store.WorkQueues.
func (s *Store) FinishWork(ctx context.Context, refs []store.WorkRef) error {
	for tag, rs := range s.byShard(refs) {
		wk, wc, wb, wq := workKeys(tag)
		keys := []string{wk, wc, wb, wq}
		var args []any
		for _, r := range rs {
			keys = append(keys, readyKey(tag, r.Queue))
			args = append(args, r.ID, r.Queue)
		}
		if err := finishWorkScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
			return fmt.Errorf("redisstore: finishing work: %w", unavailable(err))
		}
	}
	return nil
}

// ClaimedWork implements store.WorkQueues.
func (s *Store) ClaimedWork(ctx context.Context) ([]store.Work, error) {
	var out []store.Work
	for sh := range s.shards {
		wk, wc, _, _ := workKeys(s.tag(sh))
		res, err := claimedWorkScript.Run(ctx, s.rdb, []string{wc, wk}).Slice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: listing claimed work: %w", unavailable(err))
		}
		for i := 0; i+2 < len(res); i += 3 {
			run, q, _ := strings.Cut(str(res[i+2]), "\n")
			out = append(out, store.Work{Queue: q, ID: str(res[i]), RunID: run, Owner: str(res[i+1])})
		}
	}
	slices.SortFunc(out, func(a, b store.Work) int { return strings.Compare(a.RunID+"\n"+a.ID, b.RunID+"\n"+b.ID) })
	return out, nil
}

// WaitingWork implements store.WorkQueues.
func (s *Store) WaitingWork(ctx context.Context, queue string, n int) ([]store.Work, error) {
	if n <= 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, s.shards)
	for sh := range s.shards {
		cmds[sh] = pipe.ZRangeWithScores(ctx, readyKey(s.tag(sh), queue), 0, int64(n-1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	type scored struct {
		w  store.Work
		ms float64
	}
	var all []scored
	for sh, cmd := range cmds {
		for _, z := range cmd.Val() {
			id := str(z.Member)
			v, err := s.rdb.HGet(ctx, s.tag(sh)+":wk", id).Result()
			if err != nil {
				continue // finished meanwhile
			}
			run, q, _ := strings.Cut(v, "\n")
			b, _ := s.rdb.HGet(ctx, s.tag(sh)+":wb", id).Bytes()
			all = append(all, scored{store.Work{Queue: q, ID: id, RunID: run, Body: b}, z.Score})
		}
	}
	slices.SortStableFunc(all, func(a, b scored) int {
		switch {
		case a.ms < b.ms:
			return -1
		case a.ms > b.ms:
			return 1
		}
		return 0
	})
	out := make([]store.Work, 0, min(n, len(all)))
	for _, x := range all[:min(n, len(all))] {
		out = append(out, x.w)
	}
	return out, nil
}

// Hints implements store.WorkQueues. go-redis resubscribes after a
// broken connection; what was published meanwhile is lost, as hints may
// be.
func (s *Store) Hints(ctx context.Context, f func(store.Hint)) error {
	ps := s.rdb.Subscribe(ctx, s.hintChannel())
	defer ps.Close()
	ch := ps.Channel(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-ch:
			if !ok {
				return ctx.Err()
			}
			if h, ok := parseHint(m.Payload); ok {
				f(h)
			}
		}
	}
}

// parseHint reads "r VERSION ORIGIN RUNKEY" or "q QUEUE".
func parseHint(p string) (store.Hint, bool) {
	kind, rest, ok := strings.Cut(p, " ")
	if !ok {
		return store.Hint{}, false
	}
	switch kind {
	case "q":
		return store.Hint{Queue: rest}, rest != ""
	case "r":
		f := strings.SplitN(rest, " ", 3)
		if len(f) != 3 {
			return store.Hint{}, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return store.Hint{}, false
		}
		origin := f[1]
		if origin == "-" {
			origin = ""
		}
		// The run's key is TAG:run:ID.
		_, id, ok := strings.Cut(f[2], "}:run:")
		return store.Hint{Run: id, Version: n, Origin: origin}, ok && id != ""
	}
	return store.Hint{}, false
}

// Announce implements store.WorkQueues.
func (s *Store) Announce(ctx context.Context, replica string, queues []string, ttl time.Duration) error {
	if replica == "" || ttl <= 0 {
		return fmt.Errorf("redisstore: an announcement needs a replica and a positive ttl: %w", store.ErrInvalid)
	}
	if err := announceScript.Run(ctx, s.rdb, []string{s.servedKey()}, replica, ttl.Milliseconds(), strings.Join(queues, "\n")).Err(); err != nil {
		return fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return nil
}

// Served implements store.WorkQueues.
func (s *Store) Served(ctx context.Context) ([]store.Replica, error) {
	res, err := servedScript.Run(ctx, s.rdb, []string{s.servedKey()}).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	var out []store.Replica
	for i := 0; i+1 < len(res); i += 2 {
		r := store.Replica{Name: str(res[i])}
		if q := str(res[i+1]); q != "" {
			r.Queues = strings.Split(q, "\n")
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b store.Replica) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
