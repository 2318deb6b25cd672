// Package pgtest is the peers' tests' way to the machine's PostgreSQL: the
// server (or a skip when it is unreachable), and the databases a test run
// has left behind.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// OrSkip is the machine's PostgreSQL (TOLLGATE_BENCH_PG, or
// peerkit.DefaultPG) with the harness's database prefix, or a skip that
// says it is unreachable to run system (the peer measured) on.
func OrSkip(t *testing.T, prefix, system string) peerkit.PG {
	t.Helper()
	s := peerkit.PG{Admin: peerkit.DefaultPG, Prefix: prefix}
	if v := os.Getenv("TOLLGATE_BENCH_PG"); v != "" {
		s.Admin = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := s.Connect(ctx, "")
	if err != nil {
		t.Skipf("no PostgreSQL to run %s on: %v", system, err)
	}
	c.Close(ctx)
	return s
}

// Ours are the databases this process created (named by s.DBName) and has
// not dropped.
func Ours(t *testing.T, s peerkit.PG) []string {
	t.Helper()
	ctx := context.Background()
	c, err := s.Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", fmt.Sprintf("%s%d_", s.Prefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}
