// Package redisstore is the production store.Store, on Redis (go-redis v9).
//
// Invariants it enforces, and where: the store's I3, I4 and I8, in one Lua
// script per commit (commitScript, commit.go) that checks the version, the
// deadline by the server's TIME and the journal's prev hash and seq
// against the stored head before it writes run, asks, journal and index
// entries; New refuses a Redis with no append-only file unless told to
// accept the loss (redisstore.go). A run's value at a version never
// changes, so everything Go derives from the version it read (the asks it
// keeps, the index entries to move, the counts) is exact once the script
// has checked the version. The journal's chain stays checkable from
// Redis alone: records keep what their digest covers, each commit's last
// record its hash (journal.go), so store.VerifyChain finds a record
// altered in Redis at its commit's last record at the latest. Index
// buckets keep their scores in order and partition their index (index.go).
// Asks are named RUN/STOP; any other ask id is recorded in its shard's
// odd-ask hash, and an ask id names one ask in a shard.
//
// Key layout (prefix p, default "tg"). Every key of one run carries the
// same hash tag, its shard, so each commit's Lua script touches one Redis
// Cluster slot. Runs are spread over Shards shards by FNV-1a of the run id.
// A keyspace records its layout ("2") in p:config: New refuses one laid
// out by a version before it (runs as hashes), which it does not read
// and does not migrate.
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
//	p:{s07}:run:<id>                 string: the run, its asks and its journal's tail, packed
//	                                 (runvalue.go: fixed header, meta, data, tail)
//	p:{s07}:journal:<id>             list: older journal records, binary, a few KiB an element
//	                                 (journal.go); only once the tail has spilled
//	p:{s07}:runs:state:<state>       index directory: the shard's runs in a state
//	p:{s07}:runs:req:<req>:<state>   index directory: a requester's runs in a state
//	p:{s07}:asks:state:<state>       index directory: the shard's asks in a state
//	p:{s07}:asks:aud:<aud>:<state>   index directory: an audience's asks in a state
//	p:{s07}:b:<n>                    an index bucket: a small zset of entries (index.go)
//	p:{s07}:bseq                     string: the shard's last bucket number
//	p:{s07}:counts                   hash "r:<state>"/"a:<state>" → runs/asks in it; its fields
//	                                 are the states the shard has seen (queries without States)
//	p:{s07}:oddasks                  hash ask id → run id, for asks not named RUN/STOP
//	p:{s07}:reqkey:<key>             hash {run, at}: the run an idempotent create made; shard of the key
//	p:plan:<digest>                  string, written once (plans are immutable)
//	p:{skills}:skill:<name>          list: one JSON store.SkillVersion per version, version n at index n-1
//	p:{skills}:skills                zset, all scores 0: the names whose latest version is not a tombstone
//	p:{skills}:listed                hash name → that latest version's JSON without source (ListSkills' rows)
//	p:{schedules}:schedules          hash name → JSON store.Schedule
//	p:{schedules}:versions           hash name → the schedule's version (what its scripts compare)
//	p:config                         hash {shards, layout}: both are fixed for a keyspace
//
// An index is a directory of buckets (index.go): each bucket is a zset
// Redis keeps as a listpack (~35 bytes an entry, where one large zset
// costs ~128), the directory scores each bucket by the lowest score it
// may hold. Scores of index entries are milliseconds since the epoch
// (exact in a float64); the member is the 6-digit sub-millisecond
// remainder followed by the id, so Redis orders equal scores exactly as
// the store does (by time in nanoseconds, then id) and pages never need
// the runs to sort. Run indexes are scored by CreatedAt, ask indexes by
// DueAt (the ask's deadline). No index holds every run: a listing of all
// runs merges a shard's state indexes. The index buckets are the keys a
// script does not name in KEYS (it finds them in a directory): every one
// carries the shard's tag, and the commit script touches each it may
// write before its first write, so on a slot being migrated it fails
// having written nothing (index.go).
//
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
