package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbPrefix names every database this harness creates; the process id and
// the workload follow, so a leftover can be traced to a run (and dropped
// once that process is gone, see dropStale).
const dbPrefix = "tollgate_bench_river_"

// server is the PostgreSQL server the benchmark runs on, reached through
// admin, a connection string to a database that is not dropped (postgres).
type server struct {
	admin string
}

// connect opens one connection to database db (the admin database when
// db is empty).
func (s server) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.admin)
	if err != nil {
		return nil, fmt.Errorf("-pg %q: %w", s.admin, err)
	}
	if db != "" {
		cfg.Database = db
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL (%s, database %s): %w", cfg.Host, cfg.Database, err)
	}
	return conn, nil
}

// poolConfig is a pool of at most maxConns connections to database db.
func (s server) poolConfig(db string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(s.admin)
	if err != nil {
		return nil, fmt.Errorf("-pg %q: %w", s.admin, err)
	}
	cfg.ConnConfig.Database = db
	cfg.MaxConns = maxConns
	return cfg, nil
}

// createDB creates a fresh database named after this process and the
// workload.
func (s server) createDB(ctx context.Context, key string) (string, error) {
	name := fmt.Sprintf("%s%d_%s", dbPrefix, os.Getpid(), strings.ReplaceAll(key, "-", "_"))
	conn, err := s.connect(ctx, "")
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// dropDB drops a database this harness created, closing what is still
// connected to it. It runs on a context of its own so that an interrupted
// run still cleans up.
func (s server) dropDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := s.connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// dropStale drops the databases of earlier runs whose process is gone (a
// run killed before it could drop its own). Those of live processes, such
// as another run of this harness at the same time, are left alone.
func (s server) dropStale(ctx context.Context) ([]string, error) {
	conn, err := s.connect(ctx, "")
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", dbPrefix)
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("list databases: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	var dropped []string
	for _, name := range names {
		pid, _, _ := strings.Cut(strings.TrimPrefix(name, dbPrefix), "_")
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() || processAlive(n) {
			continue
		}
		if err := s.dropDB(name); err != nil {
			return dropped, err
		}
		dropped = append(dropped, name)
	}
	return dropped, nil
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return !errors.Is(err, os.ErrNotExist)
}

// settings are the server's version and the settings that decide what a
// commit costs, for the report: the figures mean little without them.
func (s server) settings(ctx context.Context) (map[string]string, error) {
	conn, err := s.connect(ctx, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	out := map[string]string{}
	for _, name := range []string{"server_version", "fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "commit_delay", "max_connections", "shared_buffers"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return nil, fmt.Errorf("current_setting(%s): %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}
