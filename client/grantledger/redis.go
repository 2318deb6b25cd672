package grantledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// DefaultSkewMargin is how much longer than its grant an entry is kept
// when Config.SkewMargin is zero.
const DefaultSkewMargin = 5 * time.Minute

// DefaultTimeout bounds one ledger call when Config.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Config configures Open.
type Config struct {
	// URL is redis://[user:pass@]host:port[/db], rediss://… or
	// unix:///path[?db=N], as redis.ParseURL reads it.
	URL string
	// KeyPrefix starts every key (default "tg:grant:"); verifiers share
	// a ledger when they use the same server, database and prefix.
	KeyPrefix string
	// SkewMargin keeps an entry this much longer than its grant is valid,
	// so a verifier whose clock runs behind the one that recorded it
	// still finds it (default DefaultSkewMargin).
	SkewMargin time.Duration
	// Timeout bounds one call (default DefaultTimeout). A call that fails
	// or times out refuses the grant (grant.ErrLedger).
	Timeout time.Duration
	// AllowVolatile accepts a Redis with no append-only file. Without it
	// Open refuses one: a restart would forget every used grant and let
	// each be replayed until it expires.
	AllowVolatile bool
}

// Redis is a grant.Ledger in Redis. Use is one SET key value PX ms NX: atomic on
// the server, so of any number of verifiers racing on one grant exactly
// one is told it is fresh. Safe for concurrent use.
type Redis struct {
	rdb     *redis.Client
	prefix  string
	margin  time.Duration
	timeout time.Duration
}

var _ grant.Ledger = (*Redis)(nil)

// Open connects to Redis, checks that it answers and keeps an append-only
// file, and returns the ledger. Close releases the connection.
func Open(ctx context.Context, cfg Config) (*Redis, error) {
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("grant ledger: %w", err)
	}
	// Maintenance notifications are a Redis Cloud feature; a self-run
	// server answers the handshake with an error.
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	opt.DisableIdentity = true
	l := &Redis{rdb: redis.NewClient(opt), prefix: cfg.KeyPrefix, margin: cfg.SkewMargin, timeout: cfg.Timeout}
	if l.prefix == "" {
		l.prefix = "tg:grant:"
	}
	if l.margin <= 0 {
		l.margin = DefaultSkewMargin
	}
	if l.timeout <= 0 {
		l.timeout = DefaultTimeout
	}
	if err := l.check(ctx, cfg.AllowVolatile); err != nil {
		l.rdb.Close()
		return nil, err
	}
	return l, nil
}

// check asks INFO persistence (allowed where CONFIG is not) whether the
// server keeps an append-only file.
func (l *Redis) check(ctx context.Context, allowVolatile bool) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	info, err := l.rdb.Info(ctx, "persistence").Result()
	if err != nil {
		return fmt.Errorf("grant ledger: Redis: %w", err)
	}
	if !allowVolatile && !strings.Contains(info, "aof_enabled:1") {
		return errors.New("grant ledger: this Redis keeps no append-only file (appendonly no), so a restart would forget " +
			"every used grant and let it be replayed until it expires; enable appendonly")
	}
	return nil
}

// Use implements grant.Ledger: it records key until `until` (plus the
// skew margin) unless it is already there.
func (l *Redis) Use(key string, until, now time.Time) (bool, error) {
	left := until.Sub(now)
	if left <= 0 {
		return false, fmt.Errorf("the grant expired at %s", until.UTC().Format(time.RFC3339))
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	// One atomic command: set only if absent, with its expiry.
	ttl := (left + l.margin + time.Millisecond - 1).Milliseconds()
	err := l.rdb.Do(ctx, "SET", l.prefix+key, until.UTC().Format(time.RFC3339Nano), "PX", ttl, "NX").Err()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil // already used
	case err != nil:
		return false, fmt.Errorf("grant ledger: %w", err)
	}
	return true, nil
}

// Close closes the connection.
func (l *Redis) Close() error { return l.rdb.Close() }
