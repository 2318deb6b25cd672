package executor

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/tollgate-dev/tollgate/examples/mcp/servers"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/adminhttp"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/grant"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// FileConfig is the executor's YAML configuration.
type FileConfig struct {
	ID           string `yaml:"id"`
	ControlPlane string `yaml:"control_plane"` // host:port
	// ControlPlanes are more replicas' executor listeners, tried in turn
	// (control_plane first) when a stream breaks or a replica is down.
	ControlPlanes []string          `yaml:"control_planes"`
	TLS           TLSConfig         `yaml:"tls"`
	GrantKeys     map[string]string `yaml:"grant_keys"` // key id → PEM public key of the control plane's grant signer
	Labels        []string          `yaml:"labels"`
	Capacity      int               `yaml:"capacity"`
	MCPServers    []MCPServer       `yaml:"mcp_servers"`
	Model         ModelConfig       `yaml:"model"` // prose steps; none: the template provider
	Telemetry     TelemetryConfig   `yaml:"telemetry"`
	// AdminListen is where /healthz and /readyz are served over plain
	// HTTP (HOST:PORT); empty: nowhere. --admin-listen overrides it.
	AdminListen string `yaml:"admin_listen"`
	// DrainTimeout is how long the leases being run may finish once the
	// process is told to stop (SIGTERM); nil: DefaultDrainTimeout, 0: stop
	// at once. --drain-timeout overrides it.
	DrainTimeout *time.Duration `yaml:"drain_timeout"`
}

// DefaultDrainTimeout is how long an executor process lets its running
// leases finish after SIGTERM unless configured: inside Kubernetes'
// default 30s grace period, with room for the drain's tail (leaveGrace).
const DefaultDrainTimeout = 20 * time.Second

// TelemetryConfig is where the executor sends its spans. Whether a lease
// is traced is the control plane's decision (the lease's traceparent).
type TelemetryConfig struct {
	OTLPEndpoint string `yaml:"otlp_endpoint"` // OTLP gRPC host:port; empty: off
	Insecure     bool   `yaml:"insecure"`      // no TLS to the collector (always so on loopback)
}

// TLSConfig is the executor's client certificate (its identity is the
// certificate's URI SAN, spiffe://TRUST-DOMAIN/executor/NAME) and the CA
// the control plane's certificate must chain to.
type TLSConfig struct {
	Cert       string `yaml:"cert"`
	Key        string `yaml:"key"`
	CA         string `yaml:"ca"`
	ServerName string `yaml:"server_name"` // default: the host of control_plane
}

// Options are what a process-level caller passes to Main.
type Options struct {
	Stdout, Stderr io.Writer
	// Stdin is the process's standard input (nil: os.Stdin); only the
	// hidden mcp-server subcommand (servers.Command) reads it.
	Stdin io.Reader
}

// Main runs the executor binary: parse flags and the config file, start
// the MCP servers, connect, and serve leases until ctx ends.
func Main(ctx context.Context, args []string, o Options) error {
	if len(args) > 0 && args[0] == servers.Subcommand {
		// Hidden: an example MCP server built into the binary, so a
		// config can host one with no source tree (`command: [executor,
		// mcp-server, monitor]`).
		return servers.Command(ctx, args[1:], o.Stdin, o.Stdout, o.Stderr)
	}
	fs := flag.NewFlagSet("executor", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	path := fs.String("config", "", "YAML config file (required)")
	adminListen := fs.String("admin-listen", "", "serve plain-HTTP probes on `HOST:PORT`: GET /healthz (200 while the process runs) and GET /readyz\n"+
		"(200 while connected to a control plane and not stopping, else 503 and why); empty: none (config: admin_listen)")
	drainTimeout := fs.Duration("drain-timeout", DefaultDrainTimeout, "on SIGTERM or interrupt, how long running leases may finish (no new lease is taken)\n"+
		"before the rest are cancelled and reported abandoned; 0: stop at once (config: drain_timeout)")
	fs.Usage = func() {
		fmt.Fprintln(o.Stderr, `executor runs Tollgate steps: it connects to a control plane, hosts MCP servers, and runs leased steps.

Usage: executor --config FILE [--admin-listen HOST:PORT] [--drain-timeout DURATION]

On SIGTERM (or interrupt) it stops gracefully: it tells the control plane
to send it no new lease, lets the leases it runs finish for up to
--drain-timeout, cancels and reports the rest abandoned, and exits within
about 5s more. Give it a grace period longer than that (Kubernetes:
terminationGracePeriodSeconds of at least drain timeout + 10s).
/readyz answers 503 "draining" from the moment it starts stopping.

A flag set on the command line wins over its config key.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *path == "" {
		fs.Usage()
		return errors.New("--config is required")
	}
	fc, err := LoadConfig(*path, os.Getenv)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["admin-listen"] {
		*adminListen = fc.AdminListen
	}
	if !set["drain-timeout"] && fc.DrainTimeout != nil {
		*drainTimeout = *fc.DrainTimeout
	}
	if *drainTimeout < 0 {
		return fmt.Errorf("drain timeout %s is negative: give 0 (stop at once) or more", *drainTimeout)
	}
	addrs := slices.DeleteFunc(append([]string{fc.ControlPlane}, fc.ControlPlanes...), func(a string) bool { return a == "" })
	if len(addrs) == 0 {
		return fmt.Errorf("config %s: control_plane (HOST:PORT of the control plane's executor listener) is required", *path)
	}
	if fc.Capacity < 0 || fc.Capacity > limits.MaxExecutorLeases {
		return fmt.Errorf("config %s: capacity %d: give 1 to %d leases at once (0: the default, 16)", *path, fc.Capacity, limits.MaxExecutorLeases)
	}
	tlsCfg, err := identity.ClientTLS(expandHome(fc.TLS.Cert), expandHome(fc.TLS.Key), expandHome(fc.TLS.CA), fc.TLS.ServerName)
	if err != nil {
		return fmt.Errorf("config %s: tls: %w", *path, err)
	}
	keys := map[string]ed25519.PublicKey{}
	for id, p := range fc.GrantKeys {
		k, err := identity.LoadPublicKeyPEM(expandHome(p))
		if err != nil {
			return fmt.Errorf("grant key %s: %w", id, err)
		}
		keys[id] = k
	}
	log := slog.New(slog.NewTextHandler(o.Stderr, nil))
	status := &Status{}
	if *adminListen != "" {
		// Up before the MCP servers start, so liveness answers meanwhile;
		// down only after Serve returned, so probes answer while it drains.
		adm, err := adminhttp.Start(*adminListen, AdminMux(status), 10*time.Second)
		if err != nil {
			return err
		}
		log.Info("admin listener", "addr", adm.Addr())
		defer func() {
			if err := adm.Close(); err != nil {
				log.Error("admin listener failed", "error", err)
			}
		}()
	}
	var prose Prose = Template{}
	if fc.Model.BaseURL != "" {
		prose = ChatCompletions{BaseURL: fc.Model.BaseURL, Model: fc.Model.Model, APIKey: os.Getenv(fc.Model.APIKeyEnv)}
	}
	tracing, err := telemetry.New(ctx, telemetry.Config{Endpoint: fc.Telemetry.OTLPEndpoint, Insecure: fc.Telemetry.Insecure,
		Service: "tollgate-executor", Instance: fc.ID, Log: log})
	if err != nil {
		return fmt.Errorf("config %s: telemetry: %w", *path, err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			log.Warn("spans not flushed", "error", err)
		}
	}()
	return Serve(ctx, ServeConfig{ID: fc.ID, Addrs: addrs, TLS: tlsCfg, GrantKeys: keys,
		Labels: fc.Labels, Capacity: fc.Capacity, MCPServers: fc.MCPServers, Prose: prose, Log: log, Tracing: tracing,
		Status: status, DrainTimeout: *drainTimeout})
}

// ServeConfig is everything an executor process needs.
type ServeConfig struct {
	ID   string
	Addr string
	// Addrs are more replicas' executor listeners (after Addr, if set): a
	// stream that breaks, or cannot open, is opened on the next in turn.
	Addrs      []string
	TLS        *tls.Config // client certificate and roots (identity.ClientTLS)
	GrantKeys  map[string]ed25519.PublicKey
	Labels     []string
	Capacity   int
	MCPServers []MCPServer
	Prose      Prose // nil: the template provider
	Log        *slog.Logger
	Tracing    *telemetry.Tracing // nil: off
	Status     *Status            // nil: none (Config.Status)
	// DrainTimeout: see Config.DrainTimeout (0: ctx's end stops at once).
	DrainTimeout time.Duration
}

// Serve starts the MCP servers and runs the executor until ctx ends. It is
// the one code path of every executor, remote or the one --dev starts.
func Serve(ctx context.Context, c ServeConfig) error {
	host, err := StartMCP(ctx, c.MCPServers)
	if err != nil {
		return err
	}
	defer host.Close()
	if c.TLS == nil {
		return errors.New("executor: no tls config; executors connect with a client certificate")
	}
	// Pings no more often than the server's enforcement allows.
	// Messages both ways are bounded by the one limit the control plane
	// shares (limits.MaxMessageBytes).
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(c.TLS)), grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limits.MaxMessageBytes), grpc.MaxCallSendMsgSize(limits.MaxMessageBytes))}
	addrs := slices.DeleteFunc(append([]string{c.Addr}, c.Addrs...), func(a string) bool { return a == "" })
	if len(addrs) == 0 {
		return errors.New("executor: no control-plane address")
	}
	clients := make([]tollgatev1.ExecutorServiceClient, len(addrs))
	for i, a := range addrs {
		conn, err := grpc.NewClient(a, opts...)
		if err != nil {
			return fmt.Errorf("connect %s: %w", a, err)
		}
		defer conn.Close()
		clients[i] = tollgatev1.NewExecutorServiceClient(conn)
	}
	if c.Prose == nil {
		c.Prose = Template{}
	}
	provider, model := c.Prose.Name()
	c.Log.Info("executor starting", "id", c.ID, "control_plane", strings.Join(addrs, ","), "tools", len(host.Tools()), "prose", provider, "model", model)
	return Run(ctx, Config{ID: c.ID, Labels: c.Labels, Capacity: c.Capacity, Host: host, Prose: c.Prose,
		Grants: grant.NewVerifier(c.GrantKeys), Log: c.Log, Tracing: c.Tracing, Status: c.Status, DrainTimeout: c.DrainTimeout,
		Connect: (&rotation{clients: clients, addrs: addrs, log: c.Log}).connect})
}

// rotation opens the executor's stream on one control-plane replica of
// several: the one that served last, else the next in turn. A replica
// that is down fails the open at once (gRPC's fail-fast), so a dead one
// costs one attempt, not a backoff.
type rotation struct {
	clients []tollgatev1.ExecutorServiceClient
	addrs   []string
	log     *slog.Logger
	cur     int // only Run's loop calls connect: no lock
}

func (r *rotation) connect(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
	var errs []error
	for i := range r.clients {
		n := (r.cur + i) % len(r.clients)
		stream, err := r.clients[n].Connect(ctx)
		if err == nil {
			if n != r.cur && len(r.clients) > 1 {
				r.log.Info("connected to another control-plane replica", "control_plane", r.addrs[n], "was", r.addrs[r.cur])
			}
			r.cur = n
			return stream, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", r.addrs[n], err))
	}
	// Next time, begin with the replica after the one that failed first.
	r.cur = (r.cur + 1) % len(r.clients)
	return nil, errors.Join(errs...)
}

// LoadConfig reads the executor's YAML file at path. In its paths and
// commands (tls, grant_keys, mcp_servers' command, env and url) it
// expands ${NAME} and ${NAME:-DEFAULT} from getenv — a DEFAULT that
// starts with ~/ is under the home directory — so one file serves any
// $TOLLGATE_HOME: ${TOLLGATE_HOME:-~/.tollgate}/dev/pki/ca.pem. A ${NAME}
// that is unset and has no default is an error, not an empty string.
// Nothing else is expanded: a "$" alone is itself.
func LoadConfig(path string, getenv func(string) string) (FileConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return FileConfig{}, fmt.Errorf("read config: %w", err)
	}
	return parseConfig(b, path, getenv)
}

// parseConfig is LoadConfig of the file path's contents b.
func parseConfig(b []byte, path string, getenv func(string) string) (FileConfig, error) {
	var fc FileConfig
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	var bad error
	x := func(field string, s *string) {
		v, err := expandVars(*s, getenv)
		if err != nil && bad == nil {
			bad = fmt.Errorf("config %s: %s: %w", path, field, err)
		}
		*s = v
	}
	x("tls.cert", &fc.TLS.Cert)
	x("tls.key", &fc.TLS.Key)
	x("tls.ca", &fc.TLS.CA)
	for id, p := range fc.GrantKeys {
		x("grant_keys."+id, &p)
		fc.GrantKeys[id] = p
	}
	for i := range fc.MCPServers {
		m := &fc.MCPServers[i]
		for j := range m.Command {
			x("mcp_servers."+m.Name+".command", &m.Command[j])
		}
		for j := range m.Env {
			x("mcp_servers."+m.Name+".env", &m.Env[j])
		}
		x("mcp_servers."+m.Name+".url", &m.URL)
	}
	return fc, bad
}

// expandVars expands ${NAME} and ${NAME:-DEFAULT} in s (see LoadConfig).
func expandVars(s string, getenv func(string) string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("%q: ${ without a closing }", limits.Short(s))
		}
		b.WriteString(s[:i])
		name, def, hasDef := strings.Cut(s[i+2:i+j], ":-")
		switch v := getenv(name); {
		case v != "":
			b.WriteString(v)
		case hasDef:
			b.WriteString(expandHome(def))
		default:
			return "", fmt.Errorf("${%s} is not set and has no default (write ${%s:-DEFAULT})", name, name)
		}
		s = s[i+j+1:]
	}
}

// expandHome turns a leading "~/" into the user's home directory.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	return p
}
