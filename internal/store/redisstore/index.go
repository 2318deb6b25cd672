package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Index sets (runs by state, by requester and state; asks by state, by
// audience and state) are kept in buckets: each is a small sorted set
// that Redis keeps as a listpack, a few dozen bytes an entry, where one
// large sorted set costs ~128 bytes an entry in its skiplist and hash
// table. The index's own key is its directory: a sorted set of its
// buckets' numbers, each scored by the lowest score the bucket may hold.
// Buckets partition the scores: a bucket holds the entries from its bound
// up to the next bucket's, so read in directory order they are the index
// in order (every entry of one score is in one bucket).
//
//	TAG:b:N     a bucket: score ms, member "NNNNNN<id>" (scoreMember)
//	TAG:bseq    the shard's last bucket number
//
// A bucket splits when it reaches the split size (Redis's
// zset-max-listpack-entries less a margin, so it never leaves the
// listpack), at the score its middle entry has; one that falls below a
// quarter of it takes in the next bucket if both fit in three quarters;
// an empty one leaves the directory.
//
// Bucket keys are not in a script's KEYS: a script finds them in a
// directory. They carry the shard's tag, so they are in the script's
// slot; and so that a slot being migrated between Redis Cluster nodes
// can never see a half-made write, the commit script touches every
// bucket it may write before it writes anything (on a node the slot is
// leaving a missing key is an error there; on the node it is coming to,
// a bucket the directory names but the node lacks answers 5, and
// nothing is written). Reads check the same, and fail as unavailable
// while the slot moves.

// bucketKey is a bucket's key.
func bucketKey(tag, n string) string { return tag + ":b:" + n }

func bucketSeqKey(tag string) string { return tag + ":bseq" }

// indexLua are the commit script's index functions. The script sets
// TAG (the shard's key prefix), SEQ (bseq's key) and SPLIT (the split
// size) before it uses them. It calls check for every entry it will add
// or remove, before any write; then idxRem and idxAdd, in the commit's
// order, which move entries only (a bucket a remove empties stays in its
// directory until the end, so an add may still land in it); then
// maintain, which drops empty buckets, splits full ones and merges
// sparse ones, touching only keys check touched.
const indexLua = `
local touched, must, fresh, work, workList, found, after, created = {}, {}, {}, {}, {}, {}, {}, {}
local seq0
local function bk(n) return TAG .. ':b:' .. n end
-- The bucket for score in dir (its number) and its bound, or nil if dir
-- is empty. Until maintain, the directories change only by a new index's
-- first bucket and the first bucket's bound reaching down, which leave
-- every bucket found before where it was: what was found is kept.
local function locate(dir, score)
  local c = created[dir]
  if c then return c[1], c[2] end -- empty in phase one: what was made since is all
  local k = dir .. '\0' .. score
  local f = found[k]
  if f ~= nil then return f[1], f[2] end
  local b = redis.call('ZRANGE', dir, score, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  if #b == 0 then b = redis.call('ZRANGE', dir, 0, 0, 'WITHSCORES') end
  found[k] = b
  return b[1], b[2]
end
local function mustHave(key)
  if not touched[key] then
    touched[key] = true
    must[#must + 1] = key
  end
end
-- Phase one: the bucket an entry goes to or leaves (and, for a remove,
-- the bucket after it, which a merge may take in) must be on this node,
-- and each add holds a fresh bucket name (a new index's first bucket, or
-- a split's). check notes them; checked tests them all at once.
local function check(dir, score, add)
  local b, lo = locate(dir, score)
  if b then
    mustHave(bk(b))
    if not add and after[bk(b)] == nil then
      local nx = redis.call('ZRANGE', dir, '(' .. lo, '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1]
      after[bk(b)] = nx or false
      if nx then mustHave(bk(nx)) end
    end
  end
  if add then
    seq0 = seq0 or tonumber(redis.call('GET', SEQ) or '0')
    fresh[#fresh + 1] = seq0 + #fresh + 1
    touched[bk(fresh[#fresh])] = true
  end
end
-- checked is false if a bucket check noted is not on this node (the slot
-- is moving; on the node it leaves, Redis stops the script here, before
-- any write), or a fresh name is taken.
local function checked()
  if #must > 0 and redis.call('EXISTS', unpack(must)) ~= #must then return false end
  if #fresh > 0 then
    local names = {}
    for i, n in ipairs(fresh) do names[i] = bk(n) end
    if redis.call('EXISTS', unpack(names)) ~= 0 then return false end
  end
  return true
end
local used = 0
local function newBucket()
  if used >= #fresh then return nil end
  used = used + 1
  return tostring(fresh[used])
end
local function note(dir, b)
  local k = bk(b)
  if not work[k] then
    work[k] = true
    workList[#workList + 1] = {dir, b}
  end
end
local function idxRem(dir, score, member)
  local b = locate(dir, score)
  if not b or not touched[bk(b)] then return end
  redis.call('ZREM', bk(b), member)
  note(dir, b)
end
local function idxAdd(dir, score, member)
  local b, lo = locate(dir, score)
  if not b then
    b = newBucket()
    if not b then return end
    redis.call('ZADD', dir, score, b)
    created[dir] = {b, score}
  elseif tonumber(score) < tonumber(lo) and tonumber(score) < tonumber(redis.call('ZSCORE', dir, b)) then
    redis.call('ZADD', dir, score, b) -- below every bucket: the first one reaches down
    if created[dir] then created[dir][2] = score end
  end
  if not touched[bk(b)] then return end
  redis.call('ZADD', bk(b), score, member)
  note(dir, b)
end
local function moveAll(to, entries)
  for i = 1, #entries, 256 do
    local args = {}
    for j = i, math.min(i + 255, #entries), 2 do
      args[#args + 1] = entries[j + 1]
      args[#args + 1] = entries[j]
    end
    redis.call('ZADD', to, unpack(args))
  end
end
local function split(dir, b)
  local key = bk(b)
  local n = redis.call('ZCARD', key)
  local mid = redis.call('ZRANGE', key, math.floor(n / 2), math.floor(n / 2), 'WITHSCORES')[2]
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
  local at = mid
  if tonumber(mid) == tonumber(first) then
    -- The lower half is all one score: split above it, if anything is.
    local above = redis.call('ZRANGE', key, '(' .. mid, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if #above == 0 then return end
    at = above[2]
  end
  local nb = newBucket()
  if not nb then return end
  moveAll(bk(nb), redis.call('ZRANGE', key, at, '+inf', 'BYSCORE', 'WITHSCORES'))
  redis.call('ZREMRANGEBYSCORE', key, at, '+inf')
  redis.call('ZADD', dir, at, nb)
end
-- maintain drops emptied buckets, splits full ones and has a sparse one
-- take in the bucket after it, if check found that one (a split only
-- puts a new bucket after a full one, so what check found after a bucket
-- a remove left sparse is still after it, or gone).
local function maintain()
  local gone = {} -- buckets merged into the one before
  for _, w in ipairs(workList) do
    local dir, b = w[1], w[2]
    local key = bk(b)
    if not gone[key] then
      local n = redis.call('ZCARD', key)
      if n == 0 then
        redis.call('ZREM', dir, b)
      elseif n >= SPLIT then
        split(dir, b)
      elseif n < SPLIT / 4 and after[key] then
        local nx = after[key]
        local m = redis.call('ZCARD', bk(nx))
        if m > 0 and n + m <= SPLIT * 3 / 4 then
          moveAll(key, redis.call('ZRANGE', bk(nx), 0, -1, 'WITHSCORES'))
          redis.call('DEL', bk(nx))
          redis.call('ZREM', dir, nx)
          gone[bk(nx)] = true
        end
      end
    end
  end
  if used > 0 then redis.call('SET', SEQ, fresh[used]) end
end
`

// rangeScript reads one index as ZRANGE BYSCORE with LIMIT would read one
// sorted set. KEYS: 1 the directory. ARGV: 1 start, 2 stop (scores in
// reading order, or ±inf), 3 "1" for descending, 4 offset, 5 count,
// 6 TAG. Returns member, score pairs; an error while the slot moves.
var rangeScript = redis.NewScript(rangeScriptSrc)

const rangeScriptSrc = `
local dir, start, stop, rev = KEYS[1], ARGV[1], ARGV[2], ARGV[3] == '1'
local off, cnt, TAG = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local out = {}
local b = redis.call('ZRANGE', dir, start, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
if #b == 0 then
  if rev then return out end
  b = redis.call('ZRANGE', dir, 0, 0, 'WITHSCORES')
  if #b == 0 then return out end
end
local lo = b[2]
local stopN = tonumber(stop)
if stop == '+inf' then stopN = math.huge elseif stop == '-inf' then stopN = -math.huge end
while true do
  local list
  if rev then
    list = redis.call('ZRANGE', dir, lo, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 16, 'WITHSCORES')
  else
    list = redis.call('ZRANGE', dir, lo, '+inf', 'BYSCORE', 'LIMIT', 0, 16, 'WITHSCORES')
  end
  if #list == 0 then return out end
  for i = 1, #list, 2 do
    local blo = tonumber(list[i + 1])
    if not rev and blo > stopN then return out end
    local key = TAG .. ':b:' .. list[i]
    if redis.call('EXISTS', key) == 0 then return redis.error_reply('TRYAGAIN an index bucket is not on this node') end
    local n = 0
    if off > 0 then n = redis.call('ZCOUNT', key, rev and stop or start, rev and start or stop) end
    if off > 0 and n <= off then
      off = off - n
    else
      local got
      if rev then
        got = redis.call('ZRANGE', key, start, stop, 'BYSCORE', 'REV', 'LIMIT', off, cnt - #out / 2, 'WITHSCORES')
      else
        got = redis.call('ZRANGE', key, start, stop, 'BYSCORE', 'LIMIT', off, cnt - #out / 2, 'WITHSCORES')
      end
      off = 0
      for j = 1, #got do out[#out + 1] = got[j] end
      if #out / 2 >= cnt then return out end
    end
    if rev and blo <= stopN then return out end
  end
  lo = '(' .. list[#list]
end
`

// rangeCmd reads up to count entries of the index dir (in shard tag)
// from start to stop, skipping offset: the read ZRANGE BYSCORE LIMIT does
// on one sorted set. It adds the command to pipe; read the reply with
// rangeReply.
func rangeCmd(ctx context.Context, pipe redis.Pipeliner, tag, dir, start, stop string, rev bool, offset, count int64) *redis.Cmd {
	r := "0"
	if rev {
		r = "1"
	}
	return rangeScript.EvalSha(ctx, pipe, []string{dir}, start, stop, r, offset, count, tag)
}

// rangeReply is a rangeCmd's entries as sorted-set members and scores.
func rangeReply(cmd *redis.Cmd) ([]redis.Z, error) {
	v, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	out := make([]redis.Z, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		m, _ := v[i].(string)
		sc, _ := v[i+1].(string)
		f, err := strconv.ParseFloat(sc, 64)
		if err != nil || math.IsNaN(f) {
			return nil, fmt.Errorf("redisstore: an index score %q", sc)
		}
		out = append(out, redis.Z{Member: m, Score: f})
	}
	return out, nil
}
