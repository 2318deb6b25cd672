package redisstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// commitScript applies one transition. Redis does not roll a script back,
// so every precondition is checked before the first write, in this order:
// the run's version (a create: the run must not exist), the deadline by
// the server's clock (TIME), the journal's first prev_hash against the
// stored head, and that the run and asks are still as Go read them to
// compute the index keys (the version makes this hold unless an ask id is
// shared between runs; "read again" then). Every key is passed in KEYS and
// all of them carry the run's hash tag: one slot.
//
// KEYS: 1 run, 2 journal, 3 runs, 4 runstates, 5 askstates, 6 new
// runs:state, 7 new runs:req, 8 old runs:state, 9 old runs:req, then five
// per ask: ask, new asks:state, new asks:aud, old asks:state, old asks:aud.
//
// ARGV: 1 expected version, 2 deadline in µs ("" = none), 3 prev_hash of
// the first journal record, 4 number of journal records, 5-8 the run as
// read (state, requester, created_ns, index member), 9-19 the run's fields
// (version state requester skill plan_digest created_ns updated_ns
// journal_seq journal_head data request_key), 20 score, 21 member, 22
// number of asks, then 15 per ask (id run_id title state audience
// requester created_ns expires_ns score member, then as read: exists state
// audience expires_ns member), then the journal records.
//
// Returns 0 written, 1 version conflict, 2 deadline passed, 3 the journal
// does not follow the stored head, 4 read again.
var commitScript = redis.NewScript(commitScriptSrc)

const commitScriptSrc = `
local expect = tonumber(ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'version', 'journal_head', 'state', 'requester', 'created_ns', 'asks')
if expect == 0 then
  if cur[1] then return 1 end
elseif not cur[1] or tonumber(cur[1]) ~= expect then
  return 1
end
if ARGV[2] ~= '' then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) >= tonumber(ARGV[2]) then return 2 end
end
local nj = tonumber(ARGV[4])
if expect ~= 0 and nj > 0 and ARGV[3] ~= (cur[2] or '') then return 3 end
if expect ~= 0 and ((cur[3] or '') ~= ARGV[5] or (cur[4] or '') ~= ARGV[6] or (cur[5] or '') ~= ARGV[7]) then return 4 end
local na = tonumber(ARGV[22])
for i = 0, na - 1 do
  local k, a = 10 + 5 * i, 23 + 15 * i
  local old = redis.call('HMGET', KEYS[k], 'state', 'audience', 'expires_ns')
  if ARGV[a + 10] == '1' then
    if (old[1] or '') ~= ARGV[a + 11] or (old[2] or '') ~= ARGV[a + 12] or (old[3] or '') ~= ARGV[a + 13] then return 4 end
  elseif old[1] then
    return 4
  end
end

-- Every check passed: write.
redis.call('HSET', KEYS[1], 'version', ARGV[9], 'state', ARGV[10], 'requester', ARGV[11], 'skill', ARGV[12],
  'plan_digest', ARGV[13], 'created_ns', ARGV[14], 'updated_ns', ARGV[15], 'journal_seq', ARGV[16],
  'journal_head', ARGV[17], 'data', ARGV[18])
if ARGV[19] ~= '' then redis.call('HSET', KEYS[1], 'request_key', ARGV[19]) end
local score, member, oldMember = ARGV[20], ARGV[21], ARGV[8]
if expect == 0 then
  redis.call('ZADD', KEYS[3], score, member)
  redis.call('ZADD', KEYS[6], score, member)
  redis.call('ZADD', KEYS[7], score, member)
  redis.call('SADD', KEYS[4], ARGV[10])
else
  local moved = ARGV[7] ~= ARGV[14] -- created_ns: the score, and maybe the member, change
  if moved then
    redis.call('ZREM', KEYS[3], oldMember)
    redis.call('ZADD', KEYS[3], score, member)
  end
  if moved or KEYS[8] ~= KEYS[6] or KEYS[9] ~= KEYS[7] then
    redis.call('ZREM', KEYS[8], oldMember)
    redis.call('ZREM', KEYS[9], oldMember)
    redis.call('ZADD', KEYS[6], score, member)
    redis.call('ZADD', KEYS[7], score, member)
    redis.call('SADD', KEYS[4], ARGV[10])
  end
end
if na > 0 then
  local list = {}
  if cur[6] then list = cjson.decode(cur[6]) end
  local listed, changed = {}, false
  for _, id in ipairs(list) do listed[id] = true end
  for i = 0, na - 1 do
    local k, a = 10 + 5 * i, 23 + 15 * i
    redis.call('HSET', KEYS[k], 'run_id', ARGV[a + 1], 'title', ARGV[a + 2], 'state', ARGV[a + 3],
      'audience', ARGV[a + 4], 'requester', ARGV[a + 5], 'created_ns', ARGV[a + 6], 'expires_ns', ARGV[a + 7])
    local ascore, amember = ARGV[a + 8], ARGV[a + 9]
    if ARGV[a + 10] ~= '1' then
      redis.call('ZADD', KEYS[k + 1], ascore, amember)
      redis.call('ZADD', KEYS[k + 2], ascore, amember)
      redis.call('SADD', KEYS[5], ARGV[a + 3])
    elseif ARGV[a + 13] ~= ARGV[a + 7] or KEYS[k + 3] ~= KEYS[k + 1] or KEYS[k + 4] ~= KEYS[k + 2] then
      redis.call('ZREM', KEYS[k + 3], ARGV[a + 14])
      redis.call('ZREM', KEYS[k + 4], ARGV[a + 14])
      redis.call('ZADD', KEYS[k + 1], ascore, amember)
      redis.call('ZADD', KEYS[k + 2], ascore, amember)
      redis.call('SADD', KEYS[5], ARGV[a + 3])
    end
    if not listed[ARGV[a]] then
      listed[ARGV[a]] = true
      list[#list + 1] = ARGV[a]
      changed = true
    end
  end
  if changed then redis.call('HSET', KEYS[1], 'asks', cjson.encode(list)) end
end
local j = 23 + 15 * na
for i = 0, nj - 1, 500 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, j + i, j + math.min(i + 499, nj - 1)))
end
local kw, w = 10 + 5 * na, j + nj
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

// prepared is a commit encoded for the script.
type prepared struct {
	c       store.Commit
	tag     string
	asks    []store.Ask // last write of each id wins, as in memstore
	journal [][]byte
	fields  []any // ARGV 9-19
}

// prior is the run and its asks as read before the script runs.
type prior struct {
	version   int64
	exists    bool
	state     string
	requester string
	createdNS string
	asks      []priorAsk
}

type priorAsk struct {
	exists    bool
	state     string
	audience  string
	expiresNS string
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
	// The records are encoded into one buffer and passed as slices of it.
	size := 0
	for _, r := range c.Journal {
		size += 320 + len(r.Actor) + len(r.Kind) + 2*len(r.Payload)
	}
	buf := make([]byte, 0, size)
	ends := make([]int, len(c.Journal))
	for i, r := range c.Journal {
		var err error
		if buf, err = appendRecord(buf, r); err != nil {
			return nil, err
		}
		ends[i] = len(buf)
	}
	p.journal = make([][]byte, len(c.Journal))
	start := 0
	for i, end := range ends {
		p.journal[i] = buf[start:end:end]
		start = end
	}
	r := c.Run
	p.fields = []any{strconv.FormatInt(r.Version, 10), r.State, r.Requester, r.Skill, r.PlanDigest,
		timeNS(r.CreatedAt), timeNS(r.UpdatedAt), strconv.FormatInt(r.JournalSeq, 10), r.JournalHead, r.Data}
	if c.ExpectVersion == 0 {
		p.fields = append(p.fields, c.RequestKey)
	} else {
		p.fields = append(p.fields, "")
	}
	return p, nil
}

func (s *Store) commit(ctx context.Context, p *prepared) error {
	c := p.c
	for attempt := range 4 {
		var pr prior
		switch {
		case c.ExpectVersion == 0 && attempt == 0:
			// A create has nothing to read: its asks are new (if one is
			// not, the script says so and we read).
			pr.asks = make([]priorAsk, len(p.asks))
		case attempt == 0 && s.written.prior(p, &pr):
			// This store wrote the version the commit follows: what it
			// wrote is what the script will find, unless another writer
			// moved the run (the script refuses: version conflict) or an
			// ask's row (the script says read again).
		default:
			var err error
			if pr, err = s.readPrior(ctx, p); err != nil {
				return err
			}
			if (c.ExpectVersion == 0 && pr.exists) || (c.ExpectVersion != 0 && pr.version != c.ExpectVersion) {
				s.written.forget(c.Run.ID)
				return store.ErrConflict
			}
		}
		code, err := s.runCommit(ctx, p, pr)
		if err != nil {
			s.written.forget(c.Run.ID)
			return fmt.Errorf("redisstore: commit: %w", unavailable(err))
		}
		switch code {
		case 0:
			s.written.remember(p)
			return nil
		case 1:
			s.written.forget(c.Run.ID)
			return store.ErrConflict
		case 2:
			return store.ErrDeadline
		case 3:
			s.written.forget(c.Run.ID)
			return fmt.Errorf("%w: the journal does not follow the run's stored head", store.ErrConflict)
		case 4:
			continue
		default:
			return fmt.Errorf("redisstore: commit script answered %d", code)
		}
	}
	s.written.forget(c.Run.ID)
	return fmt.Errorf("%w: the run's asks kept changing while committing", store.ErrConflict)
}

// maxWritten bounds the runs whose last write a store remembers.
const maxWritten = 8192

// writtenRuns remembers, per run, the index fields of the last version
// this store committed, so the next commit of that run needs no read to
// find the index entries to move. It is only a guess: the script checks
// every field against Redis before it writes.
type writtenRuns struct {
	mu   sync.Mutex
	runs map[string]*writtenRun
}

type writtenRun struct {
	version   int64
	state     string
	requester string
	createdNS string
	asks      map[string]priorAsk
}

// prior fills pr from what this store last wrote, if that is the version
// p follows.
func (w *writtenRuns) prior(p *prepared, pr *prior) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.runs[p.c.Run.ID]
	if !ok || r.version != p.c.ExpectVersion {
		return false
	}
	*pr = prior{version: r.version, exists: true, state: r.state, requester: r.requester, createdNS: r.createdNS,
		asks: make([]priorAsk, len(p.asks))}
	for i, a := range p.asks {
		pr.asks[i] = r.asks[a.ID] // absent: the ask is new
	}
	return true
}

// remember records what a commit wrote.
func (w *writtenRuns) remember(p *prepared) {
	run := p.c.Run
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs == nil {
		w.runs = map[string]*writtenRun{}
	}
	r, ok := w.runs[run.ID]
	if !ok {
		if len(w.runs) >= maxWritten {
			for id := range w.runs { // evict one, any
				delete(w.runs, id)
				break
			}
		}
		r = &writtenRun{}
		w.runs[run.ID] = r
	}
	r.version, r.state, r.requester, r.createdNS = run.Version, run.State, run.Requester, timeNS(run.CreatedAt)
	for _, a := range p.asks {
		if r.asks == nil {
			r.asks = map[string]priorAsk{}
		}
		r.asks[a.ID] = priorAsk{exists: true, state: a.State, audience: a.Audience, expiresNS: timeNS(a.DueAt)}
	}
}

func (w *writtenRuns) forget(runID string) {
	w.mu.Lock()
	delete(w.runs, runID)
	w.mu.Unlock()
}

// runCommit runs the commit script in a shared pipeline (EVALSHA; the
// script is loaded at start-up, and again here if Redis lost it).
func (s *Store) runCommit(ctx context.Context, p *prepared, pr prior) (int, error) {
	cmd := redis.NewCmd(ctx, s.scriptCmd(p, pr)...)
	if err := s.batch.do(ctx, cmd); err != nil {
		return 0, err
	}
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		keys, args := s.scriptArgs(p, pr)
		return commitScript.Eval(ctx, s.rdb, keys, args...).Int()
	}
	return cmd.Int()
}

// readPrior reads what the script needs to know to move index entries.
func (s *Store) readPrior(ctx context.Context, p *prepared) (prior, error) {
	run := redis.NewSliceCmd(ctx, "hmget", runKey(p.tag, p.c.Run.ID), "version", "state", "requester", "created_ns")
	cmds := []redis.Cmder{run}
	askCmds := make([]*redis.SliceCmd, len(p.asks))
	for i, a := range p.asks {
		askCmds[i] = redis.NewSliceCmd(ctx, "hmget", askKey(p.tag, a.ID), "state", "audience", "expires_ns")
		cmds = append(cmds, askCmds[i])
	}
	err := s.batch.do(ctx, cmds...)
	for _, c := range cmds {
		if err == nil {
			err = c.Err()
		}
	}
	if err != nil {
		return prior{}, fmt.Errorf("redisstore: commit: %w", unavailable(err))
	}
	var pr prior
	v := run.Val()
	if v[0] != nil {
		pr.exists = true
		pr.version, _ = strconv.ParseInt(str(v[0]), 10, 64)
		pr.state, pr.requester, pr.createdNS = str(v[1]), str(v[2]), str(v[3])
	}
	pr.asks = make([]priorAsk, len(p.asks))
	for i, cmd := range askCmds {
		if v := cmd.Val(); v[0] != nil {
			pr.asks[i] = priorAsk{exists: true, state: str(v[0]), audience: str(v[1]), expiresNS: str(v[2])}
		}
	}
	return pr, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// scriptCmd is the EVALSHA command of commitScript with KEYS and ARGV
// laid out as it reads them.
func (s *Store) scriptCmd(p *prepared, pr prior) []any {
	keys, args := s.scriptArgs(p, pr)
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", commitScript.Hash(), len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}

// scriptArgs lays out KEYS and ARGV as commitScript reads them.
func (s *Store) scriptArgs(p *prepared, pr prior) ([]string, []any) {
	c, tag := p.c, p.tag
	r := c.Run
	newState, newReq := runStateKey(tag, r.State), runReqKey(tag, r.Requester, r.State)
	oldState, oldReq, oldMember := newState, newReq, ""
	if pr.exists {
		oldState, oldReq = runStateKey(tag, pr.state), runReqKey(tag, pr.requester, pr.state)
		oldMember = memberOf(pr.createdNS, r.ID)
	}
	keys := make([]string, 0, 9+5*len(p.asks))
	keys = append(keys, runKey(tag, r.ID), journalKey(tag, r.ID), runsKey(tag), runStatesKey(tag), askStatesKey(tag),
		newState, newReq, oldState, oldReq)
	deadline := ""
	if !c.Deadline.IsZero() {
		// The script compares whole microseconds (the resolution of TIME):
		// now < deadline ⇔ now_µs < ⌈deadline_ns / 1000⌉.
		us := c.Deadline.UnixMicro()
		if c.Deadline.Nanosecond()%1000 != 0 {
			us++
		}
		deadline = strconv.FormatInt(us, 10)
	}
	firstPrev := ""
	if len(c.Journal) > 0 {
		firstPrev = c.Journal[0].PrevHash
	}
	score, member := scoreMember(r.CreatedAt, r.ID)
	args := make([]any, 0, 22+15*len(p.asks)+len(p.journal))
	args = append(args, strconv.FormatInt(c.ExpectVersion, 10), deadline, firstPrev, len(p.journal),
		pr.state, pr.requester, pr.createdNS, oldMember)
	args = append(args, p.fields...)
	args = append(args, score, member, len(p.asks))
	for i, a := range p.asks {
		old := pr.asks[i]
		ns, nm := askStateKey(tag, a.State), askAudKey(tag, a.Audience, a.State)
		oldS, oldA, oldAskMember, exists := ns, nm, "", "0"
		if old.exists {
			oldS, oldA = askStateKey(tag, old.state), askAudKey(tag, old.audience, old.state)
			oldAskMember, exists = memberOf(old.expiresNS, a.ID), "1"
		}
		keys = append(keys, askKey(tag, a.ID), ns, nm, oldS, oldA)
		ascore, amember := scoreMember(a.DueAt, a.ID)
		args = append(args, a.ID, a.RunID, a.Title, a.State, a.Audience, a.Requester, timeNS(a.CreatedAt), timeNS(a.DueAt),
			ascore, amember, exists, old.state, old.audience, old.expiresNS, oldAskMember)
	}
	for _, j := range p.journal {
		args = append(args, j)
	}
	return s.commitWork(keys, args, p)
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

// storedRecord is a journal record as kept in the list. The run id is the
// list's; the payload is kept byte for byte: inline when it is JSON
// without surrounding space, else base64.
type storedRecord struct {
	Seq        int64           `json:"seq"`
	Time       time.Time       `json:"time"`
	Actor      string          `json:"actor"`
	Kind       string          `json:"kind"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	PayloadB64 string          `json:"payload_b64,omitempty"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
}

// appendRecord appends r as it is kept in the list.
func appendRecord(b []byte, r store.JournalRecord) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"time":`...)
	if y := r.Time.Year(); r.Time.Location() == time.UTC && y >= 0 && y < 10000 {
		// What MarshalJSON writes, without its allocation.
		b = append(b, '"')
		b = r.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	} else {
		t, err := r.Time.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%w: journal record %d: %v", store.ErrInvalid, r.Seq, err)
		}
		b = append(b, t...)
	}
	b = appendField(b, "actor", r.Actor)
	b = appendField(b, "kind", r.Kind)
	if len(r.Payload) > 0 {
		if json.Valid(r.Payload) && !isSpace(r.Payload[0]) && !isSpace(r.Payload[len(r.Payload)-1]) {
			b = append(b, `,"payload":`...)
			b = append(b, r.Payload...)
		} else {
			b = appendField(b, "payload_b64", base64.StdEncoding.EncodeToString(r.Payload))
		}
	}
	b = appendField(b, "prev_hash", r.PrevHash)
	b = appendField(b, "hash", r.Hash)
	return append(b, '}'), nil
}

func appendField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return plan.AppendCanonical(b, v) // a JSON string
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func decodeRecord(runID, s string) (store.JournalRecord, error) {
	var sr storedRecord
	if err := json.Unmarshal([]byte(s), &sr); err != nil {
		return store.JournalRecord{}, fmt.Errorf("redisstore: a journal record of %s is damaged: %w", runID, err)
	}
	r := store.JournalRecord{RunID: runID, Seq: sr.Seq, Time: sr.Time, Actor: sr.Actor, Kind: sr.Kind,
		Payload: sr.Payload, PrevHash: sr.PrevHash, Hash: sr.Hash}
	if sr.PayloadB64 != "" {
		p, err := base64.StdEncoding.DecodeString(sr.PayloadB64)
		if err != nil {
			return store.JournalRecord{}, fmt.Errorf("redisstore: a journal record of %s is damaged: %w", runID, err)
		}
		r.Payload = p
	}
	return r, nil
}
