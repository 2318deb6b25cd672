package peerkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPG is the PostgreSQL server this machine runs (trust auth on
// loopback): the admin database, beside which each workload's databases are
// created. No TLS, as Tollgate's Redis is reached over a unix socket.
const DefaultPG = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// PG is the PostgreSQL server a harness runs on, reached through Admin, a
// connection string (postgres://user[:password]@host:port/db?sslmode=…) to
// a database that is not dropped (postgres). Every database the harness
// creates is named Prefix, the process id, "_" and the workload (DBName),
// so a leftover can be traced to a run and dropped once that process is
// gone (DropStale).
type PG struct {
	Admin  string
	Prefix string // e.g. "tollgate_bench_river_"
}

// Connect opens one connection to database db (the admin database when
// db is empty).
func (s PG) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.Admin)
	if err != nil {
		return nil, fmt.Errorf("-pg %q: %w", s.Admin, err)
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

// DBName is the name of workload key's database in this process: Prefix,
// the process id, "_" and key with its dashes made underscores.
func (s PG) DBName(key string) string {
	return fmt.Sprintf("%s%d_%s", s.Prefix, os.Getpid(), strings.ReplaceAll(key, "-", "_"))
}

// CreateDB creates DBName(key) afresh, dropping what an earlier run of
// this process left under that name, and returns the name.
func (s PG) CreateDB(ctx context.Context, key string) (string, error) {
	name := s.DBName(key)
	conn, err := s.Connect(ctx, "")
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

// DropDB drops database name if it exists, closing what is still connected
// to it. It runs on a context of its own (30 s) so that an interrupted run
// still cleans up.
func (s PG) DropDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := s.Connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// DropStale drops the databases of earlier runs whose process is gone (a
// run killed before it could drop its own) and returns their names. Those
// of live processes, such as another run of the harness at the same time,
// and this process's own are left alone.
func (s PG) DropStale(ctx context.Context) ([]string, error) {
	conn, err := s.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", s.Prefix)
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
		pid, _, _ := strings.Cut(strings.TrimPrefix(name, s.Prefix), "_")
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() || processAlive(n) {
			continue
		}
		if err := s.DropDB(name); err != nil {
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

// Settings are the server's version and the settings that decide what a
// commit costs, by name, for the report: the figures mean little without
// them.
func (s PG) Settings(ctx context.Context) (map[string]string, error) {
	conn, err := s.Connect(ctx, "")
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
