package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// Config configures the store.
type Config struct {
	// Addr is host:port, or the path of a unix socket (starting with "/").
	Addr string
	// URL is redis://[user:pass@]host:port[/db], rediss://… or unix:///path
	// (as redis.ParseURL reads it). Set Addr or URL, not both.
	//
	// A Redis Cluster is named by redis+cluster://[user:pass@]host:port
	// (or rediss+cluster://…) with more seed nodes as
	// ?addr=host2:port2&addr=…: one reachable node is enough, the client
	// learns the others and the slot map from it (redis.ParseClusterURL
	// reads the rest, after the "+cluster").
	URL string
	// AllowVolatile accepts a server that keeps no append-only file
	// (--allow-volatile-store): everything is lost when Redis restarts.
	AllowVolatile bool
	// Shards is the number of hash-tag shards runs are spread over
	// (default 16). It is recorded in Redis on first use and cannot change
	// for a keyspace afterwards.
	Shards int
	// KeyPrefix starts every key (default "tg").
	KeyPrefix string
	// Password, if set, authenticates to Redis (and every Cluster node);
	// a URL must not carry one too. It is kept out of the URL so it can
	// come from a file (a mounted Secret) rather than a command line.
	Password string
	// RootCAs, if set, are the only roots the server's certificate may
	// chain to; it needs a rediss:// (or rediss+cluster://) URL.
	RootCAs *x509.CertPool
	// IndexBucket is how many entries an index bucket holds before it
	// splits (index.go). The default keeps each in Redis's compact
	// encoding: its zset-max-listpack-entries (128 unless configured)
	// less 8, at least 8. Tests set small ones to split often.
	IndexBucket int
}

// Durability levels, as Durability reports them.
const (
	DurabilityAlways   = "always"   // AOF, fsync before every reply
	DurabilityEverysec = "everysec" // AOF, fsync once a second: up to a second of writes may be lost
	DurabilityNo       = "no"       // AOF, fsync left to the OS
	DurabilityVolatile = "volatile" // no AOF: a restart loses everything
	DurabilityUnknown  = "unknown"  // CONFIG GET is not allowed on this server
)

// Store is a Redis store.Store.
type Store struct {
	rdb        redis.UniversalClient // a *redis.Client, or a *redis.ClusterClient
	cluster    *redis.ClusterClient  // rdb, when it is a cluster
	prefix     string
	shards     int
	width      int
	durability string
	addr       string
	written    writtenRuns
	batch      *batcher
	// bucketSplit is the size at which an index bucket splits.
	bucketSplit int
}

var _ store.Store = (*Store)(nil)

// New connects to Redis and checks that it keeps an append-only file.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Shards == 0 {
		cfg.Shards = 16
	}
	if cfg.Shards < 1 || cfg.Shards > 16384 {
		return nil, fmt.Errorf("redisstore: shards must be between 1 and 16384, not %d", cfg.Shards)
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "tg"
	}
	if strings.ContainsAny(cfg.KeyPrefix, "{}") {
		return nil, fmt.Errorf("redisstore: the key prefix %q must not contain { or } (they would change the hash tag)", cfg.KeyPrefix)
	}
	var opt *redis.Options
	switch {
	case cfg.Addr != "" && cfg.URL != "":
		return nil, errors.New("redisstore: set the address or the URL of Redis, not both")
	case isClusterURL(cfg.URL):
		return newCluster(ctx, cfg)
	case cfg.URL != "":
		var err error
		if opt, err = redis.ParseURL(cfg.URL); err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
	case strings.HasPrefix(cfg.Addr, "/"):
		opt = &redis.Options{Network: "unix", Addr: cfg.Addr}
	case cfg.Addr != "":
		opt = &redis.Options{Addr: cfg.Addr}
	default:
		return nil, errors.New("redisstore: no Redis address or URL")
	}
	if opt.MaintNotificationsConfig == nil {
		// Maintenance notifications are a Redis Cloud feature; a self-run
		// server answers the handshake with an error.
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	opt.DisableIdentity = true
	if err := secure(cfg, &opt.Password, &opt.TLSConfig); err != nil {
		return nil, err
	}
	return open(ctx, cfg, redis.NewClient(opt), nil, opt.Network+":"+opt.Addr)
}

// clusterSchemes are the URL schemes that name a Redis Cluster, and what
// redis.ParseClusterURL calls them.
var clusterSchemes = map[string]string{"redis+cluster": "redis", "rediss+cluster": "rediss"}

func isClusterURL(u string) bool {
	scheme, _, ok := strings.Cut(u, "://")
	_, cl := clusterSchemes[scheme]
	return ok && cl
}

// newCluster opens the store on a Redis Cluster named by cfg.URL.
func newCluster(ctx context.Context, cfg Config) (*Store, error) {
	scheme, rest, _ := strings.Cut(cfg.URL, "://")
	u := clusterSchemes[scheme] + "://" + rest
	if p, err := url.Parse(u); err == nil && p.Path != "" && p.Path != "/" && p.Path != "/0" {
		return nil, fmt.Errorf("redisstore: a Redis Cluster has only database 0, not %s", p.Path[1:])
	}
	opt, err := redis.ParseClusterURL(u)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if opt.MaintNotificationsConfig == nil {
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	opt.DisableIdentity = true
	if err := secure(cfg, &opt.Password, &opt.TLSConfig); err != nil {
		return nil, err
	}
	c := redis.NewClusterClient(opt)
	return open(ctx, cfg, c, c, "cluster:"+strings.Join(opt.Addrs, ","))
}

// secure applies cfg's password and roots to a client's options.
func secure(cfg Config, password *string, tlsCfg **tls.Config) error {
	if cfg.Password != "" {
		if *password != "" {
			return errors.New("redisstore: the URL carries a password and one is given apart: give it once")
		}
		*password = cfg.Password
	}
	if cfg.RootCAs != nil {
		if *tlsCfg == nil {
			return errors.New("redisstore: a CA bundle is given but the URL is not rediss:// (TLS)")
		}
		(*tlsCfg).RootCAs = cfg.RootCAs
	}
	return nil
}

// open finishes New on a client of either kind (cluster is rdb when it is
// a cluster, else nil).
func open(ctx context.Context, cfg Config, rdb redis.UniversalClient, cluster *redis.ClusterClient, addr string) (*Store, error) {
	s := &Store{rdb: rdb, cluster: cluster, prefix: cfg.KeyPrefix, shards: cfg.Shards, addr: addr, bucketSplit: cfg.IndexBucket}
	s.width = max(2, len(strconv.Itoa(cfg.Shards-1)))
	if err := s.start(ctx, cfg.AllowVolatile); err != nil {
		s.rdb.Close()
		return nil, err
	}
	s.batch = newBatcher(s.rdb)
	return s, nil
}

func (s *Store) start(ctx context.Context, allowVolatile bool) error {
	if s.cluster == nil {
		d, err := durability(ctx, s.rdb, s.addr, allowVolatile)
		if err != nil {
			return err
		}
		s.durability = d
	} else {
		// Every master (a replica's file matters once it is promoted, and
		// New is not the place to see that): the store is as durable as
		// its least durable master.
		var mu sync.Mutex
		var nodeErr error
		s.durability = DurabilityAlways
		err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			d, err := durability(ctx, node, node.Options().Addr, allowVolatile)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				nodeErr = err
			case slices.Index(durabilities, d) < slices.Index(durabilities, s.durability):
				s.durability = d
			}
			return err
		})
		switch {
		case nodeErr != nil:
			return nodeErr
		case err != nil: // no slot map: no node answered
			return fmt.Errorf("redisstore: connecting to Redis at %s: %w", s.addr, err)
		}
	}
	// The shard of a run is part of its keys: a keyspace keeps its count.
	// And its layout: a keyspace that an older version laid out (runs as
	// hashes, no "layout") is not read by this one, and not migrated.
	cfgKey := s.prefix + ":config"
	lay, err := s.rdb.Eval(ctx, configScript, []string{cfgKey}, s.shards, layout).Text()
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if lay != layout {
		return fmt.Errorf("redisstore: the keyspace %q holds runs in another layout (%q, not %q) that this version does not read: "+
			"use another key prefix (or an empty Redis)", s.prefix, lay, layout)
	}
	if s.bucketSplit == 0 {
		s.bucketSplit = defaultBucketSplit(ctx, s.rdb)
	}
	got, err := s.rdb.HGet(ctx, cfgKey, "shards").Int()
	if err != nil {
		return fmt.Errorf("redisstore: reading %s: %w", cfgKey, err)
	}
	if got != s.shards {
		return fmt.Errorf("redisstore: the keyspace %q was laid out over %d shards, not %d: configure the store with %d shards (or use another key prefix)",
			s.prefix, got, s.shards, got)
	}
	for _, sc := range append([]*redis.Script{commitScript, claimScript, takeoverScript, releaseScript, rangeScript, journalScript}, workScripts...) {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("redisstore: loading a script: %w", err)
		}
	}
	return nil
}

// layout names how this version keeps runs (doc.go); p:config records it.
// A keyspace laid out before it has shards but no layout: hash runs.
const layout = "2"

// configScript records the shard count and layout of a new keyspace and
// answers the keyspace's layout ("1" for one without: laid out before).
const configScript = `
if redis.call('HEXISTS', KEYS[1], 'shards') == 1 and redis.call('HEXISTS', KEYS[1], 'layout') == 0 then return '1' end
redis.call('HSETNX', KEYS[1], 'shards', ARGV[1])
redis.call('HSETNX', KEYS[1], 'layout', ARGV[2])
return redis.call('HGET', KEYS[1], 'layout')
`

// defaultBucketSplit is the index bucket size that keeps buckets in
// Redis's listpack encoding: its zset-max-listpack-entries less room for
// a commit's own adds (128 − 8 when CONFIG is not allowed).
func defaultBucketSplit(ctx context.Context, rdb redis.UniversalClient) int {
	n := 128
	if conf, err := rdb.ConfigGet(ctx, "zset-max-listpack-entries").Result(); err == nil {
		if v, err := strconv.Atoi(conf["zset-max-listpack-entries"]); err == nil {
			n = v
		}
	}
	return max(8, n-8)
}

// durability checks that the server rdb talks to keeps an append-only
// file (or that allowVolatile accepts it does not) and says how durable it
// is.
func durability(ctx context.Context, rdb redis.Cmdable, addr string, allowVolatile bool) (string, error) {
	conf, err := rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		switch {
		case !isRedisError(err):
			return "", fmt.Errorf("redisstore: connecting to Redis at %s: %w", addr, err)
		case !allowVolatile:
			return "", fmt.Errorf("redisstore: cannot check that Redis at %s keeps an append-only file (CONFIG GET failed: %w); "+
				"allow CONFIG for this user, or pass --allow-volatile-store to start without that check", addr, err)
		}
		return DurabilityUnknown, nil
	}
	switch {
	case conf["appendonly"] != "yes":
		if !allowVolatile {
			return "", fmt.Errorf("redisstore: Redis at %s keeps no append-only file (appendonly is %q), so a restart would lose "+
				"every run and parked ask; enable it (appendonly yes and appendfsync always in redis.conf, or "+
				"CONFIG SET appendonly yes then CONFIG REWRITE), or pass --allow-volatile-store to accept the loss",
				addr, conf["appendonly"])
		}
		return DurabilityVolatile, nil
	case conf["appendfsync"] != "":
		return conf["appendfsync"], nil
	}
	return DurabilityUnknown, nil
}

// durabilities are the durability levels, least durable first.
var durabilities = []string{DurabilityVolatile, DurabilityUnknown, DurabilityNo, DurabilityEverysec, DurabilityAlways}

func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// Durability says how much of what was acknowledged survives a crash of
// Redis: "always", "everysec", "no" (the server's appendfsync), "volatile"
// (no append-only file) or "unknown"; on a cluster, that of its least
// durable master at New.
func (s *Store) Durability() string { return s.durability }

// Close implements store.Store.
func (s *Store) Close() error {
	s.batch.close()
	return s.rdb.Close()
}

// replicaKey holds a replica's heartbeat; it expires when the heartbeat
// lapses (Redis's own clock).
func (s *Store) replicaKey(replica string) string { return s.prefix + ":replica:" + replica }

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, replica string, ttl time.Duration) error {
	if replica == "" || ttl <= 0 {
		return fmt.Errorf("redisstore: a heartbeat needs a replica and a positive ttl: %w", store.ErrInvalid)
	}
	if err := s.rdb.Set(ctx, s.replicaKey(replica), "1", ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return nil
}

// Leave implements store.Store.
func (s *Store) Leave(ctx context.Context, replica string) error {
	if err := s.rdb.Del(ctx, s.replicaKey(replica)).Err(); err != nil {
		return fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return nil
}

// Alive implements store.Store.
func (s *Store) Alive(ctx context.Context, replica string) (bool, error) {
	if replica == "" {
		return false, nil
	}
	n, err := s.rdb.Exists(ctx, s.replicaKey(replica)).Result()
	if err != nil {
		return false, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return n == 1, nil
}

// Now implements store.Store: the Redis server's clock (TIME), the clock
// the commit script judges deadlines by (on a cluster, any one master's).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	cmd := redis.NewTimeCmd(ctx, "time")
	if err := s.batch.do(ctx, cmd); err != nil {
		return time.Time{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	t, err := cmd.Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: %w", unavailable(err))
	}
	return t.UTC(), nil
}

// --- keys ---

func (s *Store) shardOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(s.shards))
}

// tag is the key prefix of shard n: "p:{s07}".
func (s *Store) tag(n int) string { return fmt.Sprintf("%s:{s%0*d}", s.prefix, s.width, n) }

func (s *Store) runTag(runID string) string { return s.tag(s.shardOf(runID)) }

func runKey(tag, id string) string     { return tag + ":run:" + id }
func journalKey(tag, id string) string { return tag + ":journal:" + id }
func countsKey(tag string) string      { return tag + ":counts" }
func oddAsksKey(tag string) string     { return tag + ":oddasks" }
func runStateKey(tag, state string) string {
	return tag + ":runs:state:" + escape(state)
}
func runReqKey(tag, requester, state string) string {
	return tag + ":runs:req:" + requester + ":" + escape(state)
}
func askStateKey(tag, state string) string { return tag + ":asks:state:" + escape(state) }
func askAudKey(tag, audience, state string) string {
	return tag + ":asks:aud:" + audience + ":" + escape(state)
}
func (s *Store) reqKey(key string) string { return s.tag(s.shardOf(key)) + ":reqkey:" + key }
func (s *Store) planKey(digest string) string {
	return s.prefix + ":plan:" + digest
}

// escape makes a state safe as the last component of a key: it never
// contains ":", so "req:a:b" + ":" + state splits only one way.
func escape(state string) string {
	if !strings.ContainsAny(state, ":%") {
		return state
	}
	return strings.NewReplacer("%", "%25", ":", "%3A").Replace(state)
}

// --- encodings ---

// timeNS is how a time is kept in a hash: nanoseconds since the epoch, ""
// for the zero time.
func timeNS(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func parseNS(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: bad time %q", v)
	}
	return time.Unix(0, n).UTC(), nil
}

// scoreMember is a sorted-set entry for time t and id: the score in whole
// milliseconds (exact as a float64) and the member "NNNNNN<id>" where
// NNNNNN is the rest of t below the millisecond, in nanoseconds.
func scoreMember(t time.Time, id string) (int64, string) {
	return t.UnixMilli(), fmt.Sprintf("%06d", t.Nanosecond()%1_000_000) + id
}

// memberOf recomputes the member for a time kept with timeNS.
func memberOf(ns, id string) string {
	t, err := parseNS(ns)
	if err != nil {
		return ""
	}
	_, m := scoreMember(t, id)
	return m
}

// entry is one sorted-set element as read back.
type entry struct {
	ms     int64
	member string
	tag    string // the shard it was read from
}

func (e entry) id() string {
	if len(e.member) < 6 {
		return ""
	}
	return e.member[6:]
}

func (e entry) time() time.Time {
	sub := 0
	if len(e.member) >= 6 {
		sub, _ = strconv.Atoi(e.member[:6])
	}
	return time.UnixMilli(e.ms).Add(time.Duration(sub)).UTC()
}

// cmpEntry orders entries as the store does: by time, then id.
func cmpEntry(a, b entry) int {
	switch {
	case a.ms < b.ms:
		return -1
	case a.ms > b.ms:
		return 1
	}
	return strings.Compare(a.member, b.member)
}
