// Package redisstore is the production store.Store, on Redis (go-redis v9).
//
// Invariants it enforces, and where: the store's I3, I4 and I8, in one Lua
// script per commit (commitScript, commit.go) that checks the version, the
// deadline by the server's TIME and the journal's prev hash against the
// stored head before it writes run, asks and journal; New refuses a Redis
// with no append-only file unless told to accept the loss (redisstore.go).
//
// Key layout (prefix p, default "tg"). Every key of one run carries the
// same hash tag, its shard, so each commit's Lua script touches one Redis
// Cluster slot. Runs are spread over Shards shards by FNV-1a of the run id.
//
// On a Redis Cluster (a redis+cluster:// URL) the shards' slots spread the
// runs over the masters; a script never spans two slots, and reads over
// several shards are pipelines the cluster client splits by node. New
// checks the append-only file of every master and loads the scripts on
// every node; a node that lost them (a failover, a slot moved to it) gets
// the script again on NOSCRIPT. A pipeline that holds a script is never
// resent by go-redis (batch.go, sendOnce), so a commit cannot run twice
// and report its own write as a conflict; MOVED and ASK are still
// followed. Now reads the TIME of one master, and each commit is judged
// by its own master's clock: the masters' clocks must agree.
//
//	p:{s07}:run:<id>                 hash: version state requester skill plan_digest created_ns
//	                                 updated_ns journal_seq journal_head data asks [request_key]
//	p:{s07}:journal:<id>             list: one JSON record per journal entry, in seq order
//	p:{s07}:ask:<askid>              hash: run_id title state audience requester created_ns expires_ns
//	p:{s07}:runs                     zset of every run of the shard
//	p:{s07}:runs:state:<state>       zset of the shard's runs in a state
//	p:{s07}:runs:req:<req>:<state>   zset of a requester's runs in a state
//	p:{s07}:asks:state:<state>       zset of the shard's asks in a state
//	p:{s07}:asks:aud:<aud>:<state>   zset of an audience's asks in a state
//	p:{s07}:runstates, :askstates    sets of the states the shard has seen (for queries without States)
//	p:{s07}:reqkey:<key>             hash {run, at}: the run an idempotent create made; shard of the key
//	p:plan:<digest>                  string, written once (plans are immutable)
//	p:{skills}:skill:<name>          list: one JSON store.SkillVersion per version, version n at index n-1
//	p:{skills}:skills                zset, all scores 0: the names whose latest version is not a tombstone
//	p:{skills}:listed                hash name → that latest version's JSON without source (ListSkills' rows)
//	p:{schedules}:schedules          hash name → JSON store.Schedule
//	p:{schedules}:versions           hash name → the schedule's version (what its scripts compare)
//	p:config                         hash {shards}: the shard count is fixed for a keyspace
//
// The scores of run and ask sorted sets are milliseconds since the epoch
// (exact in a float64); the member is the 6-digit sub-millisecond
// remainder followed by the id, so Redis orders equal scores exactly as
// the store does (by time in nanoseconds, then id) and pages never need
// the hashes to sort. Run zsets are scored by CreatedAt, ask zsets by
// DueAt (the ask's deadline).
// In a state key the state is escaped (":" and "%"), so an audience or a
// requester that contains ":" cannot make two index keys collide; so is
// the name in a skill's key.
//
// Skills and schedules each keep every key under one hash tag of their
// own ({skills}, {schedules}), so each write is one script in one slot:
// AddSkillVersion checks the latest version (the list's length), appends
// and moves the listing at once; a schedule's put and delete compare its
// version and write. These scripts are not loaded by New: a node that
// lacks one gets its source (EVAL), sent once as a commit is
// (registry.go).
package redisstore
