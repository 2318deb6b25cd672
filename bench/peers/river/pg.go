package main

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// dbPrefix names every database this harness creates; the process id and
// the workload follow, so a leftover can be traced to a run (and dropped
// once that process is gone, see peerkit.PG.DropStale).
const dbPrefix = "tollgate_bench_river_"

// server is the PostgreSQL server the benchmark runs on, reached through
// Admin, a connection string to a database that is not dropped (postgres);
// its databases are named by dbPrefix.
type server struct {
	peerkit.PG
}

// poolConfig is a pool of at most maxConns connections to database db.
func (s server) poolConfig(db string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(s.Admin)
	if err != nil {
		return nil, fmt.Errorf("-pg %q: %w", s.Admin, err)
	}
	cfg.ConnConfig.Database = db
	cfg.MaxConns = maxConns
	return cfg, nil
}
