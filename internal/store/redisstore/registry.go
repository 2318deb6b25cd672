package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// Saved skills and schedules (store.Skills, store.Schedules). Each kind
// lives under one hash tag of its own, {skills} or {schedules} (doc.go):
// a write checks its version and writes in one script, in one slot. They
// are few and written by people, so one slot (one master) holds them all.

func (s *Store) skillKey(name string) string { return s.prefix + ":{skills}:skill:" + escape(name) }
func (s *Store) skillNamesKey() string       { return s.prefix + ":{skills}:skills" }
func (s *Store) skillRowsKey() string        { return s.prefix + ":{skills}:listed" }
func (s *Store) schedulesKey() string        { return s.prefix + ":{schedules}:schedules" }
func (s *Store) scheduleVersionsKey() string {
	return s.prefix + ":{schedules}:versions"
}

// script is a Lua script and its source, which runScript sends again
// (EVAL) to a node that does not hold it.
type script struct {
	*redis.Script
	src string
}

func newScript(src string) script { return script{redis.NewScript(src), src} }

// addSkillScript appends a skill version. A skill's versions are 1, 2, 3…
// with version n at index n-1 of its list, so the latest version is the
// list's length and the check needs no decoding. KEYS: 1 the skill's
// list, 2 the listed names (zset), 3 the listed rows (hash). ARGV: 1
// expect, 2 the version's JSON, 3 the name, 4 the row's JSON ("" for a
// tombstone: the name leaves the listing). Returns 0 written, 1 conflict.
var addSkillScript = newScript(`
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return 1 end
redis.call('RPUSH', KEYS[1], ARGV[2])
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('HDEL', KEYS[3], ARGV[3])
else
  redis.call('ZADD', KEYS[2], 0, ARGV[3])
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
return 0
`)

// listSkillsScript reads a page of the listing: up to ARGV[2] names from
// ARGV[1] (a ZRANGEBYLEX bound), and their rows, in one read so a row
// never misses its name. KEYS: 1 names, 2 rows.
var listSkillsScript = newScript(`
local names = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
if #names == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(names))
`)

// putScheduleScript writes a schedule at version ARGV[2]+1 if its stored
// version and life (kept apart from the JSON as "VERSION:CREATED_NS", so
// the script compares them without decoding) are ARGV[2] and ARGV[4], 0
// meaning none. KEYS: 1 schedules, 2 versions. ARGV: 1 name, 2 expect,
// 3 JSON, 4 CreatedAt in ns. Returns 0 written, 1 conflict.
var putScheduleScript = newScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
local expect = tonumber(ARGV[2])
if expect == 0 then
  if cur then return 1 end
elseif cur ~= ARGV[2] .. ':' .. ARGV[4] then
  return 1
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], tostring(expect + 1) .. ':' .. ARGV[4])
return 0
`)

// deleteScheduleScript removes a schedule at version ARGV[2]. KEYS as
// putScheduleScript's; ARGV: 1 name, 2 expect. Returns 0 removed, 1
// conflict, 2 none.
var deleteScheduleScript = newScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then return 2 end
if tonumber(string.match(cur, '^(%d+):')) ~= tonumber(ARGV[2]) then return 1 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 0
`)

// registryScripts are the scripts above (a test reads their sources).
var registryScripts = []script{addSkillScript, listSkillsScript, putScheduleScript, deleteScheduleScript}

// runScript runs sc in a shared pipeline, where it is sent once (batch.go,
// sendOnce): a write that ran is never run again to answer a conflict
// with itself. A node without the script (New does not load these; a
// failover or a moved slot loses them) gets its source by EVAL, sent once
// too. The error is the command's, marked unavailable.
func (s *Store) runScript(ctx context.Context, sc script, keys []string, args ...any) (*redis.Cmd, error) {
	cmd := redis.NewCmd(ctx, evalArgs("evalsha", sc.Hash(), keys, args)...)
	err := s.batch.do(ctx, cmd)
	if err == nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = redis.NewCmd(ctx, evalArgs("eval", sc.src, keys, args)...)
		err = s.batch.do(ctx, cmd)
	}
	if err == nil {
		err = cmd.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return cmd, nil
}

func evalArgs(name, script string, keys []string, args []any) []any {
	out := make([]any, 0, 3+len(keys)+len(args))
	out = append(out, name, script, len(keys))
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...)
}

// nameToken is ListSkills' page token: the shared encoding (token.go),
// keyed by the name alone, as memstore's.
func nameToken(name string) string { return store.PageToken(time.Unix(0, 0), name) }

// AddSkillVersion implements store.Skills.
func (s *Store) AddSkillVersion(ctx context.Context, v store.SkillVersion, expect int64) (store.SkillVersion, error) {
	if v.Name == "" {
		return store.SkillVersion{}, fmt.Errorf("redisstore: a skill without a name: %w", store.ErrInvalid)
	}
	v.Version = expect + 1
	b, err := json.Marshal(v)
	if err != nil {
		return store.SkillVersion{}, fmt.Errorf("%w: skill %s: %v", store.ErrInvalid, v.Name, err)
	}
	row := ""
	if !v.Deleted {
		r := v
		r.Source = ""
		rb, err := json.Marshal(r)
		if err != nil {
			return store.SkillVersion{}, fmt.Errorf("%w: skill %s: %v", store.ErrInvalid, v.Name, err)
		}
		row = string(rb)
	}
	cmd, err := s.runScript(ctx, addSkillScript, []string{s.skillKey(v.Name), s.skillNamesKey(), s.skillRowsKey()},
		expect, b, v.Name, row)
	if err != nil {
		return store.SkillVersion{}, err
	}
	switch code, _ := cmd.Int(); code {
	case 0:
		return v, nil
	case 1:
		return store.SkillVersion{}, store.ErrConflict
	default:
		return store.SkillVersion{}, fmt.Errorf("redisstore: the skill script answered %d", code)
	}
}

func decodeSkill(name, v string) (store.SkillVersion, error) {
	var sv store.SkillVersion
	if err := json.Unmarshal([]byte(v), &sv); err != nil {
		return store.SkillVersion{}, fmt.Errorf("redisstore: a version of skill %s is damaged: %w", name, err)
	}
	return sv, nil
}

// SkillVersion implements store.Skills.
func (s *Store) SkillVersion(ctx context.Context, name string, version int64) (store.SkillVersion, error) {
	if version < 0 {
		return store.SkillVersion{}, store.ErrNotFound // LINDEX would count from the end
	}
	v, err := s.rdb.LIndex(ctx, s.skillKey(name), version-1).Result() // 0: index -1, the latest
	switch {
	case errors.Is(err, redis.Nil):
		return store.SkillVersion{}, store.ErrNotFound
	case err != nil:
		return store.SkillVersion{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return decodeSkill(name, v)
}

// SkillHistory implements store.Skills: limit is bounded by store.Limit.
// The list holds whole versions; Source is dropped here.
func (s *Store) SkillHistory(ctx context.Context, name string, after int64, limit int) ([]store.SkillVersion, error) {
	after = max(after, 0)
	vals, err := s.rdb.LRange(ctx, s.skillKey(name), after, after+int64(store.Limit(limit))-1).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	out := make([]store.SkillVersion, len(vals))
	for i, v := range vals {
		if out[i], err = decodeSkill(name, v); err != nil {
			return nil, err
		}
		out[i].Source = ""
	}
	return out, nil
}

// ListSkills implements store.Skills: names in byte order (ZRANGEBYLEX of
// equal scores), as memstore sorts them.
func (s *Store) ListSkills(ctx context.Context, pageToken string, limit int) ([]store.SkillVersion, string, error) {
	from := "-"
	if pageToken != "" {
		_, after, err := store.ParsePageToken(pageToken)
		if err != nil {
			return nil, "", err
		}
		from = "(" + after
	}
	limit = store.Limit(limit)
	cmd, err := s.runScript(ctx, listSkillsScript, []string{s.skillNamesKey(), s.skillRowsKey()}, from, limit+1)
	if err != nil {
		return nil, "", err
	}
	rows, err := cmd.Slice()
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: %w", unavailable(err))
	}
	out := make([]store.SkillVersion, 0, min(len(rows), limit))
	for _, r := range rows {
		if len(out) == limit {
			return out, nameToken(out[limit-1].Name), nil
		}
		row, ok := r.(string)
		if !ok {
			continue // not there: the script reads names and rows at once, so never
		}
		v, err := decodeSkill("", row)
		if err != nil {
			return nil, "", err
		}
		out = append(out, v)
	}
	return out, "", nil
}

// PutSchedule implements store.Schedules.
func (s *Store) PutSchedule(ctx context.Context, sc store.Schedule, expect int64) (store.Schedule, error) {
	if sc.Name == "" {
		return store.Schedule{}, fmt.Errorf("redisstore: a schedule without a name: %w", store.ErrInvalid)
	}
	sc.Version = expect + 1
	b, err := json.Marshal(sc)
	if err != nil {
		return store.Schedule{}, fmt.Errorf("%w: schedule %s: %v", store.ErrInvalid, sc.Name, err)
	}
	cmd, err := s.runScript(ctx, putScheduleScript, []string{s.schedulesKey(), s.scheduleVersionsKey()}, sc.Name, expect, b, strconv.FormatInt(sc.CreatedAt.UnixNano(), 10))
	if err != nil {
		return store.Schedule{}, err
	}
	switch code, _ := cmd.Int(); code {
	case 0:
		// What was stored, decoded: the caller's map and claim stay its own.
		return decodeSchedule(sc.Name, string(b))
	case 1:
		return store.Schedule{}, store.ErrConflict
	default:
		return store.Schedule{}, fmt.Errorf("redisstore: the schedule script answered %d", code)
	}
}

func decodeSchedule(name, v string) (store.Schedule, error) {
	var sc store.Schedule
	if err := json.Unmarshal([]byte(v), &sc); err != nil {
		return store.Schedule{}, fmt.Errorf("redisstore: schedule %s is damaged: %w", name, err)
	}
	return sc, nil
}

// GetSchedule implements store.Schedules.
func (s *Store) GetSchedule(ctx context.Context, name string) (store.Schedule, error) {
	v, err := s.rdb.HGet(ctx, s.schedulesKey(), name).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return store.Schedule{}, store.ErrNotFound
	case err != nil:
		return store.Schedule{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return decodeSchedule(name, v)
}

// ListSchedules implements store.Schedules.
func (s *Store) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	m, err := s.rdb.HGetAll(ctx, s.schedulesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	out := make([]store.Schedule, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		sc, err := decodeSchedule(name, m[name])
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// DeleteSchedule implements store.Schedules.
func (s *Store) DeleteSchedule(ctx context.Context, name string, expect int64) error {
	cmd, err := s.runScript(ctx, deleteScheduleScript, []string{s.schedulesKey(), s.scheduleVersionsKey()}, name, expect)
	if err != nil {
		return err
	}
	switch code, _ := cmd.Int(); code {
	case 0:
		return nil
	case 1:
		return store.ErrConflict
	case 2:
		return store.ErrNotFound
	default:
		return fmt.Errorf("redisstore: the schedule script answered %d", code)
	}
}
