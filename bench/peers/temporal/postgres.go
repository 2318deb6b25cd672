package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	sconfig "go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// dbPrefix names every database this harness creates; the process id and
// the workload follow, so a leftover can be traced to a run and dropped
// once that process is gone (peerkit.PG.DropStale).
const dbPrefix = "tollgate_bench_temporal_"

// The connection pools are those of Temporal's own docker config
// (config/docker.yaml: SQL_MAX_CONNS 20, SQL_VIS_MAX_CONNS 10), per store
// and per service: frontend, history, matching and worker each open their
// own.
const (
	defaultMaxConns    = 20
	visibilityMaxConns = 10
)

// pgServer is the PostgreSQL server, reached through the admin database's
// URL (postgres://user[:password]@host:port/db?sslmode=…); its databases
// are named by dbPrefix.
type pgServer struct {
	peerkit.PG
}

// sqlConfig is Temporal's persistence config for database db, through the
// postgres12_pgx plugin (Temporal's PostgreSQL plugin on the pgx driver).
func (s pgServer) sqlConfig(db string, maxConns int) (*sconfig.SQL, error) {
	u, err := url.Parse(s.Admin)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("-pg %q: want a URL postgres://user@host:port/database", s.Admin)
	}
	pw, _ := u.User.Password()
	attrs := map[string]string{}
	for k, v := range u.Query() {
		attrs[k] = v[0]
	}
	host := u.Host
	if u.Port() == "" {
		host += ":5432"
	}
	return &sconfig.SQL{
		PluginName:        postgresql.PluginNamePGX,
		DatabaseName:      db,
		ConnectAddr:       host,
		ConnectProtocol:   "tcp",
		User:              u.User.Username(),
		Password:          pw,
		ConnectAttributes: attrs,
		MaxConns:          maxConns,
		MaxIdleConns:      maxConns,
		MaxConnLifetime:   time.Hour,
	}, nil
}

// setup creates database db and lays Temporal's schema on it with the
// server module's own schema tool, as `temporal-sql-tool create-database`,
// `setup-schema -v 0.0` and `update-schema -d schema/postgresql/v12/NAME/versioned`
// do: name is temporal or visibility.
func (s pgServer) setup(db, name string) error {
	cfg, err := s.sqlConfig(db, 1)
	if err != nil {
		return err
	}
	admin, err := pgx.ParseConfig(s.Admin)
	if err != nil {
		return fmt.Errorf("-pg %q: %w", s.Admin, err)
	}
	logger := log.NewNoopLogger()
	// DoCreateDatabase connects to the admin database to create db.
	if err := sqltool.DoCreateDatabase(cfg, admin.Database, logger); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	cfg.DatabaseName = db
	conn, err := sqltool.NewConnection(cfg, logger)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", db, err)
	}
	defer conn.Close()
	dir := "postgresql/v12/" + name
	// setup-schema -v 0.0 lays only the version tables; update-schema then
	// applies every versioned change, as Temporal's auto-setup does.
	if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
		return fmt.Errorf("setup-schema %s on %s: %w", dir, db, err)
	}
	if err := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: db, SchemaName: dir}, logger).Run(); err != nil {
		return fmt.Errorf("update-schema %s on %s: %w", dir, db, err)
	}
	return nil
}

// connSampler counts, every 250 ms, the server's connections to a
// workload's databases and keeps the peak: each service opens pools of its
// own, and PostgreSQL refuses connections past max_connections.
type connSampler struct {
	mu   sync.Mutex
	peak int64
	quit chan struct{}
	wg   sync.WaitGroup
}

func (s pgServer) sampleConns(dbs []string) *connSampler {
	cs := &connSampler{quit: make(chan struct{})}
	cs.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := s.Connect(ctx, "")
		cancel()
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			var n int64
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = ANY($1)", dbs).Scan(&n)
			cancel()
			if err == nil {
				cs.mu.Lock()
				cs.peak = max(cs.peak, n)
				cs.mu.Unlock()
			}
			select {
			case <-t.C:
			case <-cs.quit:
				return
			}
		}
	})
	return cs
}

// load is the peak so far.
func (cs *connSampler) load() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.peak
}

// stop ends the sampling; idempotent.
func (cs *connSampler) stop() {
	select {
	case <-cs.quit:
	default:
		close(cs.quit)
	}
	cs.wg.Wait()
}

// startPostgres starts Temporal's own server (temporal.NewServer: frontend,
// history, matching and worker in this process) on two fresh databases,
// one for the default store and one for visibility, with cfg.shards
// history shards and otherwise default dynamic config (or -tuned's), then
// registers a namespace and starts one worker and one client.
func startPostgres(ctx context.Context, cfg config, key string, sdkLogger *sdkLog, acts *activities) (e *env, err error) {
	s := pgServer{peerkit.PG{Admin: cfg.pg, Prefix: dbPrefix}}
	base := s.DBName(key)
	dbs := []string{base, base + "_visibility"}
	var stops []func() error
	cleanup := func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cleanup())
		}
	}()
	for i, name := range []string{"temporal", "visibility"} {
		stops = append(stops, func() error { return s.DropDB(dbs[i]) })
		if err := s.DropDB(dbs[i]); err != nil {
			return nil, err
		}
		if err := s.setup(dbs[i], name); err != nil {
			return nil, err
		}
	}
	def, err := s.sqlConfig(dbs[0], defaultMaxConns)
	if err != nil {
		return nil, err
	}
	vis, err := s.sqlConfig(dbs[1], visibilityMaxConns)
	if err != nil {
		return nil, err
	}
	sc, hostPort := serverConfig(def, vis, int32(cfg.shards))
	dc := dynamicconfig.StaticClient{}
	if cfg.tuned {
		dc = tunedConfig()
	}
	var logger log.Logger = log.NewNoopLogger()
	if cfg.serverLog != "" {
		logger = log.NewZapLogger(log.BuildZapLogger(log.Config{Level: "info", OutputFile: cfg.serverLog}))
	}
	authorizer := authorization.NewNoopAuthorizer()
	srv, err := temporal.NewServer(
		temporal.WithConfig(sc),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*sconfig.Config) authorization.ClaimMapper { return authorization.NewNoopClaimMapper() }),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal.NewServer: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	stops = append(stops, srv.Stop)
	// As temporaltest does: ringpop may panic if used at once.
	time.Sleep(100 * time.Millisecond)

	namespace := "bench"
	if err := registerNamespace(ctx, hostPort, namespace, sdkLogger); err != nil {
		return nil, err
	}
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: namespace, Logger: sdkLogger})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", hostPort, err)
	}
	stops = append(stops, func() error { c.Close(); return nil })
	w := worker.New(c, taskQueue, worker.Options{WorkflowPanicPolicy: worker.FailWorkflow})
	register(acts)(w)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start the worker: %w", err)
	}
	stops = append(stops, func() error { w.Stop(); return nil })
	conns := s.sampleConns(dbs)
	return &env{
		c: c, hostPort: hostPort, acts: acts, key: key,
		stop: func() error {
			conns.stop()
			return cleanup()
		},
		connPeak: conns.load,
	}, nil
}

// registerNamespace registers namespace through the frontend (retention one
// day, the least Temporal accepts) and waits until the frontend serves it.
func registerNamespace(ctx context.Context, hostPort, namespace string, logger *sdkLog) error {
	nc, err := client.NewNamespaceClient(client.Options{HostPort: hostPort, Logger: logger})
	if err != nil {
		return fmt.Errorf("namespace client: %w", err)
	}
	defer nc.Close()
	if err := nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		return fmt.Errorf("register namespace %s: %w", namespace, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := nc.Describe(ctx, namespace)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not served 30 s after registering: %w", namespace, err)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lowFreePort is a port free on 127.0.0.1 below 32768. Temporal's
// PostgreSQL schema keeps a member's port in a SMALLINT
// (cluster_membership.rpc_port), so the kernel's ephemeral ports (from
// 32768, what temporaltest's freeport hands out) fail to register and
// the services never find each other.
func lowFreePort() int {
	for {
		port := 20000 + rand.IntN(32768-20000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
}

// serverConfig is the static config of one server: what temporaltest's
// lite server sets (v1.32.0 temporaltest/internal/lite_server.go: loopback
// ports, one cluster, archival off) with PostgreSQL persistence and
// shards history shards, and no metrics or pprof listeners.
func serverConfig(def, vis *sconfig.SQL, shards int32) (*sconfig.Config, string) {
	const ip = "127.0.0.1"
	frontend := lowFreePort()
	service := func(port int) sconfig.Service {
		return sconfig.Service{RPC: sconfig.RPC{GRPCPort: port, MembershipPort: lowFreePort(), BindOnLocalHost: true}}
	}
	hostPort := fmt.Sprintf("%s:%d", ip, frontend)
	return &sconfig.Config{
		Global: sconfig.Global{
			Membership: sconfig.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: ip},
		},
		Persistence: sconfig.Persistence{
			DefaultStore:     "postgres-default",
			VisibilityStore:  "postgres-visibility",
			NumHistoryShards: shards,
			DataStores: map[string]sconfig.DataStore{
				"postgres-default":    {SQL: def},
				"postgres-visibility": {SQL: vis},
			},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        "active",
			CurrentClusterName:       "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: hostPort},
			},
		},
		DCRedirectionPolicy: sconfig.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]sconfig.Service{
			"frontend": service(frontend),
			"history":  service(lowFreePort()),
			"matching": service(lowFreePort()),
			"worker":   service(lowFreePort()),
		},
		Archival: sconfig.Archival{
			History:    sconfig.HistoryArchival{State: "disabled"},
			Visibility: sconfig.VisibilityArchival{State: "disabled"},
		},
		PublicClient: sconfig.PublicClient{HostPort: hostPort},
		NamespaceDefaults: sconfig.NamespaceDefaults{
			Archival: sconfig.ArchivalNamespaceDefaults{
				History:    sconfig.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: sconfig.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
	}, hostPort
}
