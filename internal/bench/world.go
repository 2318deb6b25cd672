package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/redisserver"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
	"github.com/tollgate-dev/tollgate/internal/stubtools"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/grant"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// messageLimits is the one message limit every Tollgate sender and
// receiver shares, on the bench's clients too.
func messageLimits() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limits.MaxMessageBytes), grpc.MaxCallSendMsgSize(limits.MaxMessageBytes))
}

// The control plane's defaults for tokens (--jwt-issuer, --jwt-audience).
const (
	issuer   = "tollgate-dev"
	audience = "tollgate"
	keyID    = "bench"
)

// worldConfig says what one world runs.
type worldConfig struct {
	// Dir is a fresh directory the world owns (Redis's data, keys,
	// certificates, the policy); it is removed by close.
	Dir   string
	Fsync string // redis-server --appendfsync
	// Replicas control planes share the one Redis (at least 1).
	Replicas int
	// Executors connect with Capacity leases each; executor i to replica
	// i mod Replicas.
	Executors, Capacity int
	// Users get tokens; the policy makes them members (they may approve
	// their own `ask me` gates). alice is always there.
	Users []string
	// OnCall hears of each tool call as the executor begins it.
	OnCall func(server, tool, key string)
	// OTLPEndpoint, when set, turns tracing on: the control plane exports
	// to it with TraceSample (see trace.go).
	OTLPEndpoint string
	TraceSample  float64
}

// world is one Redis (AOF on), cfg.Replicas control planes started as
// the binary starts them (controlplane.Run with the same flags, each with
// its own listeners) on that one Redis store, and in-process executors
// connected over loopback gRPC with mTLS, the same code path as a remote
// executor, hosting the no-op tools of stubtools. Clients reach the
// control planes over loopback gRPC with bearer tokens, one connection
// per replica; workloads spread their calls over the replicas (plane).
type world struct {
	cfg    worldConfig
	redis  *redisserver.Server
	planes []*plane
	tokens map[string]string

	stopExecs context.CancelFunc
	execs     sync.WaitGroup
	conns     []*grpc.ClientConn
	execPlane map[string]*plane // executor id → the replica it connects to
}

// plane is one control plane replica of a world and the clients' one
// connection to it.
type plane struct {
	addr     string // the API listener
	execAddr string // the executor listener (mTLS)
	log      *planeLog
	conn     *grpc.ClientConn
	runs     tollgatev1.RunServiceClient
	asks     tollgatev1.ApprovalServiceClient
	stop     context.CancelFunc
	done     chan error // Run's result, once it has returned
}

// plane is the i-th replica, round-robin: callers number their clients
// or their runs and so spread them over the replicas.
func (w *world) plane(i int) *plane { return w.planes[i%len(w.planes)] }

// elsewhere says whether a step leased to executor ran on another
// replica than p: another replica claimed it, or handed it to its own
// executor, rather than p.
func (w *world) elsewhere(p *plane, executor string) bool {
	return w.execPlane[executor] != p
}

// logs is the last lines of every replica's log, for an error message.
func (w *world) logs() string {
	var b strings.Builder
	for i, p := range w.planes {
		if len(w.planes) > 1 {
			fmt.Fprintf(&b, "replica %d ", i)
		}
		b.WriteString(p.log.tail())
	}
	return b.String()
}

// startWorld starts everything and returns once every executor has
// connected.
func startWorld(ctx context.Context, cfg worldConfig) (w *world, err error) {
	w = &world{cfg: cfg, tokens: map[string]string{}, execPlane: map[string]*plane{}}
	if cfg.Replicas < 1 {
		return w, fmt.Errorf("%d replicas: want at least 1", cfg.Replicas)
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	redisDir, err := mkdir(cfg.Dir, "redis")
	if err != nil {
		return w, err
	}
	w.redis, err = redisserver.Start(redisserver.Config{Dir: redisDir, Args: []string{"--appendfsync", cfg.Fsync}})
	if err != nil {
		return w, err
	}
	args, err := w.files()
	if err != nil {
		return w, err
	}
	if cfg.OTLPEndpoint != "" {
		args = append(args, "--otlp-endpoint", cfg.OTLPEndpoint, "--trace-sample", strconv.FormatFloat(cfg.TraceSample, 'g', -1, 64))
	}
	// One after another: the first creates the grant key (--grant-key)
	// the others then read.
	for i := range cfg.Replicas {
		p, err := w.startPlane(ctx, append(slices.Clip(args), "--replica", fmt.Sprintf("bench-cp-%d", i)))
		if p != nil {
			w.planes = append(w.planes, p)
		}
		if err != nil {
			return w, err
		}
		// Made as a client, so the transport goroutines the connection
		// starts count as the clients' CPU (cpusplit.go).
		asClient(ctx, func(context.Context) {
			p.conn, err = grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), messageLimits())
		})
		if err != nil {
			return w, err
		}
		p.runs = tollgatev1.NewRunServiceClient(p.conn)
		p.asks = tollgatev1.NewApprovalServiceClient(p.conn)
	}
	if err := w.startExecutors(ctx); err != nil {
		return w, err
	}
	return w, nil
}

func mkdir(parts ...string) (string, error) {
	p := filepath.Join(parts...)
	return p, os.MkdirAll(p, 0o700)
}

// files writes what the control plane reads (the token key, the policy,
// the executor PKI; it makes its grant key itself), mints the users'
// tokens, and returns the control plane's flags.
func (w *world) files() ([]string, error) {
	dir := w.cfg.Dir
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	keyDir, err := mkdir(dir, "keys")
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(keyDir, keyID+".pem") // the key id is the file's name
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	users := append([]string{"alice"}, w.cfg.Users...)
	var policy bytes.Buffer
	policy.Write(examples.Policy)
	policy.WriteString("\n# bench users: members, who approve their own `ask me` gates\n")
	for _, u := range users {
		tok, err := identity.Mint(priv, keyID, issuer, audience, u, 24*time.Hour, time.Now())
		if err != nil {
			return nil, err
		}
		w.tokens[u] = tok
		if u != "alice" {
			fmt.Fprintf(&policy, "g, %s, role:member, acme, _, _\n", u)
		}
	}
	policyPath := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(policyPath, policy.Bytes(), 0o644); err != nil {
		return nil, err
	}
	catalogPath := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catalogPath, catalog(), 0o644); err != nil {
		return nil, err
	}
	pki, err := identity.MintDevPKI(filepath.Join(dir, "pki"), identity.DefaultTrustDomain, w.executorIDs(), 24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	return []string{
		"--redis", w.redis.URL(),
		"--listen", "127.0.0.1:0",
		"--executor-listen", "127.0.0.1:0",
		"--home", dir,
		"--jwt-key", keyPath,
		"--grant-key", filepath.Join(dir, "keys", "grant.key"),
		"--policy", policyPath,
		"--catalog", catalogPath,
		"--executor-cert", pki.Server.Cert, "--executor-key", pki.Server.Key, "--executor-ca", pki.CA,
		"--drain-timeout", "2s",
		// Every client of the sustained phase watches its runs as alice.
		"--max-watches-per-caller", "1024",
	}, nil
}

func (w *world) executorIDs() []string {
	ids := make([]string, w.cfg.Executors)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%d", i+1)
	}
	return ids
}

// startPlane runs controlplane.Run with args and waits until it serves.
// Unless it returns nil, the plane is running and close stops it.
func (w *world) startPlane(ctx context.Context, args []string) (*plane, error) {
	pctx, stop := context.WithCancel(ctx)
	p := &plane{log: &planeLog{}, stop: stop, done: make(chan error, 1)}
	ready := make(chan string, 1)
	mc := controlplane.MainConfig{Stdout: io.Discard, Stderr: p.log, OpenRedis: openRedis,
		Ready: func(addr string) { ready <- addr }}
	go func() { p.done <- controlplane.Run(pctx, args, mc) }()
	select {
	case p.addr = <-ready:
	case err := <-p.done:
		p.done <- err
		if err == nil {
			err = errors.New("it returned")
		}
		return p, fmt.Errorf("control plane: %w\n%s", err, p.log.tail())
	case <-time.After(60 * time.Second):
		return p, fmt.Errorf("control plane: not serving after 60 s\n%s", p.log.tail())
	}
	// Run logs its listeners before it calls Ready.
	if p.execAddr = p.log.execAddr(); p.execAddr == "" {
		return p, fmt.Errorf("control plane: no executor listener in its log\n%s", p.log.tail())
	}
	return p, nil
}

// openRedis is the control plane binary's store opener (cmd/controlplane).
func openRedis(ctx context.Context, c controlplane.RedisConfig, _ *slog.Logger) (store.Store, error) {
	return redisstore.New(ctx, redisstore.Config{URL: c.URL, AllowVolatile: c.AllowVolatile, Password: c.Password, RootCAs: c.RootCAs})
}

// startExecutors connects the executors, executor i to replica i mod
// Replicas, and waits until every replica has its own.
func (w *world) startExecutors(ctx context.Context) error {
	grantKey, err := identity.LoadPublicKeyPEM(filepath.Join(w.cfg.Dir, "keys", "grant.pub"))
	if err != nil {
		return fmt.Errorf("grant key: %w", err)
	}
	cat, err := compiler.ParseCatalog(catalog())
	if err != nil {
		return err
	}
	host := stubtools.New(stubtools.Config{Catalog: cat, OnCall: w.cfg.OnCall})
	ectx, stop := context.WithCancel(ctx)
	w.stopExecs = stop
	pki := filepath.Join(w.cfg.Dir, "pki")
	want := make([]int, len(w.planes)) // executors each replica waits for
	for i, id := range w.executorIDs() {
		p := w.plane(i)
		want[i%len(w.planes)]++
		w.execPlane[id] = p
		tlsCfg, err := identity.ClientTLS(filepath.Join(pki, "executor-"+id+".pem"), filepath.Join(pki, "executor-"+id+".key"), filepath.Join(pki, "ca.pem"), "")
		if err != nil {
			return fmt.Errorf("executor %s: %w", id, err)
		}
		conn, err := grpc.NewClient(p.execAddr, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)), messageLimits())
		if err != nil {
			return err
		}
		w.conns = append(w.conns, conn)
		client := tollgatev1.NewExecutorServiceClient(conn)
		// Tracing (trace.go): executors export where the plane does.
		tracing, err := telemetry.New(ctx, telemetry.Config{Endpoint: w.cfg.OTLPEndpoint, Service: "tollgate-executor", Instance: id})
		if err != nil {
			return err
		}
		w.execs.Go(func() {
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = tracing.Shutdown(sctx)
			}()
			_ = executor.Run(ectx, executor.Config{ID: id, Capacity: w.cfg.Capacity, Host: host, Prose: executor.Template{}, Tracing: tracing,
				Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"grant": grantKey}),
				Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
					return client.Connect(ctx)
				}})
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, p := range w.planes {
		for p.log.connected() < want[i] {
			if time.Now().After(deadline) {
				return fmt.Errorf("replica %d: %d of its %d executors connected after 60 s\n%s", i, p.log.connected(), want[i], p.log.tail())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// catalog is the example catalog and test.sleep (stubtools sleeps), for
// the control plane (--catalog) and the executors alike.
func catalog() []byte {
	return append(append([]byte{}, examples.Catalog...), "  test:\n    - {name: sleep, annotations: {readOnlyHint: true}}\n"...)
}

// as sends a call with user's token.
func (w *world) as(user string) grpc.CallOption {
	return grpc.PerRPCCredsCallOption{Creds: identity.PerRPCCredentials{Token: w.tokens[user], Insecure: true}}
}

// close stops the executors, then every control plane (they drain
// together) and waits until each Run has returned, then Redis, and
// removes the world's directory.
func (w *world) close() {
	if w.stopExecs != nil {
		w.stopExecs()
		w.execs.Wait()
	}
	for _, c := range w.conns {
		c.Close()
	}
	for _, p := range w.planes {
		if p.conn != nil {
			p.conn.Close()
		}
		p.stop()
	}
	for _, p := range w.planes {
		<-p.done
	}
	if w.redis != nil {
		w.redis.Close()
	}
	os.RemoveAll(w.cfg.Dir)
}

// planeLog is the control plane's log: it keeps the last lines for error
// messages and reads the listeners and executor connections from it.
type planeLog struct {
	mu       sync.Mutex
	partial  []byte
	lines    []string
	exec     string
	sessions int
}

var execListenRe = regexp.MustCompile(`msg=serving .*executor_listen=(\S+)`)

func (l *planeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if m := execListenRe.FindStringSubmatch(line); m != nil {
			l.exec = strings.Trim(m[1], `"`)
		}
		if strings.Contains(line, `msg="executor connected"`) {
			l.sessions++
		}
		l.lines = append(l.lines, line)
		if len(l.lines) > 200 {
			l.lines = l.lines[len(l.lines)-100:]
		}
	}
	return len(p), nil
}

func (l *planeLog) execAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exec
}

func (l *planeLog) connected() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions
}

// tail is the last lines of the log, for an error message.
func (l *planeLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString("control plane log (last lines):\n")
	for _, line := range l.lines[max(0, len(l.lines)-30):] {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}
