package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/lru"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// DevUsers get tokens minted by --dev: the people of the dev policy
// (examples/policy.csv), audrey (auditor) and otto (operator), who may
// read every run, and mallory, who is in no policy row.
var DevUsers = []string{"alice", "bob", "carol", "dave", "audrey", "otto", "mallory"}

// devExecutors get client certificates minted by --dev: the executor
// --dev starts, and two for executors started by hand
// (examples/executor.yaml).
var devExecutors = []string{"dev-executor", "edge-1", "edge-2"}

// Options are the control plane's settings, from flags or a config file
// (the same names in YAML).
type Options struct {
	Listen        string   `yaml:"listen"`
	AdminListen   string   `yaml:"admin_listen"`
	PProf         bool     `yaml:"pprof"`         // net/http/pprof on the admin listener
	OTLPEndpoint  string   `yaml:"otlp_endpoint"` // OTLP gRPC collector for traces; empty: off
	TraceSample   float64  `yaml:"trace_sample"`  // share of runs traced
	Redis         string   `yaml:"redis"`
	AllowVolatile bool     `yaml:"allow_volatile_store"`
	Dev           bool     `yaml:"dev"`
	Home          string   `yaml:"home"`
	Catalogs      []string `yaml:"catalogs"`
	Issuer        string   `yaml:"jwt_issuer"`
	Audience      string   `yaml:"jwt_audience"`
	JWTKeys       []string `yaml:"jwt_keys"`     // PEM public keys; the key id is the file name without extension
	Policy        string   `yaml:"policy"`       // casbin policy CSV (pkg/authz); watched and reloaded
	PolicyModel   string   `yaml:"policy_model"` // casbin model; default: the built-in one
	// PolicyAllowEmpty accepts a policy with no p rule; PolicyMaxDrop is
	// the share of the rules in force one reload may drop (authz.Guard).
	PolicyAllowEmpty bool            `yaml:"policy_allow_empty"`
	PolicyMaxDrop    float64         `yaml:"policy_max_drop"`
	Domain           string          `yaml:"domain"`       // the policy domain of this plane's runs
	AgentOwners      []string        `yaml:"agent_owners"` // AGENT=PERSON
	EscalateTo       string          `yaml:"escalate_to"`  // role an ask nobody may decide goes to
	DeadlinePass     time.Duration   `yaml:"deadline_pass"`
	Webhooks         []WebhookOption `yaml:"webhooks"`
	AskExpiry        time.Duration   `yaml:"ask_expiry"`
	Reflection       bool            `yaml:"reflection"`
	DrainTimeout     time.Duration   `yaml:"drain_timeout"`
	GrantKey         string          `yaml:"grant_key"` // PEM (PKCS#8) Ed25519 private key that signs grants
	LeaseTTL         time.Duration   `yaml:"lease_ttl"`
	GateGrantTTL     time.Duration   `yaml:"gate_grant_ttl"`
	// The executor listener: mTLS, ExecutorService only.
	ExecutorListen string `yaml:"executor_listen"`
	ExecutorCert   string `yaml:"executor_cert"` // the listener's certificate (PEM)
	ExecutorKey    string `yaml:"executor_key"`
	ExecutorCA     string `yaml:"executor_ca"` // CA bundle that executors' client certificates chain to
	TrustDomain    string `yaml:"trust_domain"`
	// Bounds on what callers can make a replica hold in memory.
	PlanCache           int `yaml:"plan_cache"`
	MaxWatchesPerCaller int `yaml:"max_watches_per_caller"`
}

// WebhookOption is one webhook receiver in the config file. The secret is
// read from SecretFile (at least 16 bytes), never written in the config.
type WebhookOption struct {
	Name       string   `yaml:"name"`
	URL        string   `yaml:"url"`
	SecretFile string   `yaml:"secret_file"`
	Roles      []string `yaml:"roles"`
	People     []string `yaml:"people"`
	Kinds      []string `yaml:"kinds"`
}

// StoreOpener opens the production store for a --redis URL; it is a
// field so the binary wires the Redis store in and tests can substitute.
type StoreOpener func(ctx context.Context, url string, allowVolatile bool, log *slog.Logger) (store.Store, error)

// MainConfig carries what the binary needs from its process.
type MainConfig struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	OpenRedis      StoreOpener
	// Ready, if set, receives the gRPC address once the server listens.
	Ready func(addr string)
	// DevExecutor, if set, is started by --dev next to the server: an
	// executor connecting over loopback gRPC (the same code path as a
	// remote one) hosting the example MCP servers. It blocks until ctx ends.
	DevExecutor func(ctx context.Context, d DevExecutor) error
}

// DevExecutor is what the --dev executor needs to connect: the executor
// listener's address and a client TLS config holding its certificate.
type DevExecutor struct {
	Addr     string
	TLS      *tls.Config
	GrantKey ed25519.PublicKey
	Home     string
	Log      *slog.Logger
	// OTLPEndpoint is where the control plane sends spans; the executor
	// sends its own there too (empty: off).
	OTLPEndpoint string
}

type listFlag struct{ v *[]string }

func (l listFlag) String() string     { return strings.Join(*l.v, ",") }
func (l listFlag) Set(s string) error { *l.v = append(*l.v, s); return nil }

const usage = `controlplane serves the Tollgate API: plans, runs, approvals and audit.

Usage:
  controlplane --dev                       embedded store, dev identities, loopback only
  controlplane --redis URL --listen ADDR --jwt-key FILE [flags]

Flags:
`

// Run runs the control plane until ctx is cancelled, then drains.
func Run(ctx context.Context, args []string, mc MainConfig) error {
	if mc.Getenv == nil {
		mc.Getenv = os.Getenv
	}
	var o Options
	var configFile string
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.SetOutput(mc.Stderr)
	fs.Usage = func() { fmt.Fprint(mc.Stderr, usage); fs.PrintDefaults() }
	fs.StringVar(&configFile, "config", "", "YAML config file (flags override it)")
	fs.StringVar(&o.Listen, "listen", "", "gRPC listen address (default 127.0.0.1:7443 with --dev)")
	fs.StringVar(&o.AdminListen, "admin-listen", "", "admin HTTP address for /healthz and /metrics (Prometheus) (empty: off)")
	fs.StringVar(&o.OTLPEndpoint, "otlp-endpoint", "", "send traces by OTLP gRPC to this HOST:PORT (Jaeger, a collector); empty: no tracing")
	fs.Float64Var(&o.TraceSample, "trace-sample", 1, "share of runs traced, 0 < S ≤ 1; executors follow the decision through each lease")
	fs.BoolVar(&o.PProf, "pprof", false, "serve net/http/pprof under /debug/pprof/ on the admin listener (needs --admin-listen)")
	fs.StringVar(&o.Redis, "redis", "", "Redis URL, e.g. redis://127.0.0.1:6379/0 or unix:///run/redis.sock")
	fs.BoolVar(&o.AllowVolatile, "allow-volatile-store", false, "accept a Redis that keeps nothing on disk (appendonly no)")
	fs.BoolVar(&o.Dev, "dev", false, "development mode: memory store, dev key and tokens, loopback only")
	fs.StringVar(&o.Home, "home", "", "state directory (default $TOLLGATE_HOME or ~/.tollgate)")
	fs.Var(listFlag{&o.Catalogs}, "catalog", "tool catalog file (repeatable; default: the built-in example catalog); executors' advertised annotations make it stricter, never laxer")
	fs.StringVar(&o.Issuer, "jwt-issuer", "tollgate-dev", "required JWT issuer")
	fs.StringVar(&o.Audience, "jwt-audience", "tollgate", "required JWT audience")
	fs.Var(listFlag{&o.JWTKeys}, "jwt-key", "Ed25519 public key PEM that signs tokens (repeatable)")
	fs.StringVar(&o.Policy, "policy", "", "policy file (CSV, pkg/authz): roles, limits, quorum, separation of duties, delegations; reloaded on change (--dev: examples/policy.csv copied to the dev folder)")
	fs.StringVar(&o.PolicyModel, "policy-model", "", "casbin model file (default: the built-in one)")
	fs.BoolVar(&o.PolicyAllowEmpty, "policy-allow-empty", false, "accept a policy with no p rule, which denies every decision (without it such a file fails the start, and a reload to it keeps the last good policy)")
	fs.Float64Var(&o.PolicyMaxDrop, "policy-max-drop", authz.DefaultMaxDrop, "largest share of the rules in force, 0 < S ≤ 1, one policy reload may drop; a reload dropping more keeps the last good policy and logs an error (1: no limit)")
	fs.StringVar(&o.Domain, "domain", "acme", "policy domain of this control plane's runs")
	fs.StringVar(&o.EscalateTo, "escalate-to", "", "role an ask goes to when policy leaves nobody eligible and its recipe names no escalation (--dev: finance)")
	fs.DurationVar(&o.DeadlinePass, "deadline-pass", 15*time.Second, "how often the deadline pass applies due reminders, escalations and expiries (readers apply them anyway)")
	fs.Var(listFlag{&o.AgentOwners}, "agent-owner", "AGENT=PERSON: PERSON owns the agent principal AGENT; separation of duties excludes both (repeatable)")
	fs.DurationVar(&o.AskExpiry, "ask-expiry", engine.DefaultAskExpiry, "deadline of an ask whose recipe sets none")
	fs.BoolVar(&o.Reflection, "reflection", false, "serve gRPC reflection")
	fs.StringVar(&o.GrantKey, "grant-key", "", "Ed25519 private key (PEM) that signs grants; executors trust its public half (--dev: created in the dev folder)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 10*time.Second, "how long shutdown waits for in-flight RPCs")
	fs.DurationVar(&o.LeaseTTL, "lease-ttl", 10*time.Second, "a lease whose executor sends no heartbeat for this long is lost")
	fs.DurationVar(&o.GateGrantTTL, "gate-grant-ttl", DefaultGateGrantTTL, "how long the grant of an approved gate (approvectl gate) stays valid after the approval")
	fs.StringVar(&o.ExecutorListen, "executor-listen", "", "executor listener address: mTLS, ExecutorService only (default 127.0.0.1:7444 with --dev; empty: no executors)")
	fs.StringVar(&o.ExecutorCert, "executor-cert", "", "certificate (PEM) of the executor listener (--dev: minted in the dev folder)")
	fs.StringVar(&o.ExecutorKey, "executor-key", "", "private key (PEM) of --executor-cert")
	fs.StringVar(&o.ExecutorCA, "executor-ca", "", "CA bundle (PEM) executors' client certificates must chain to")
	fs.StringVar(&o.TrustDomain, "trust-domain", identity.DefaultTrustDomain, "executors are spiffe://TRUST-DOMAIN/executor/NAME in their certificate's URI SAN")
	fs.IntVar(&o.PlanCache, "plan-cache", runner.DefaultPlanCache, "plans kept in memory in each plan cache (engines, compilations), least recently used evicted; an evicted plan is read from the store again")
	fs.IntVar(&o.MaxWatchesPerCaller, "max-watches-per-caller", DefaultMaxWatchesPerCaller, "watch streams (WatchRun, WatchAsks) one caller may hold open at once; more are refused with RESOURCE_EXHAUSTED")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if configFile != "" {
		if err := loadConfig(configFile, &o, fs); err != nil {
			return err
		}
	}
	if o.PProf && o.AdminListen == "" {
		return errors.New("--pprof is served on the admin listener: give --admin-listen too")
	}
	log := slog.New(slog.NewTextHandler(mc.Stderr, nil))
	if o.Home == "" {
		o.Home = mc.Getenv("TOLLGATE_HOME")
	}
	if o.Home == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("find home directory: %w", err)
		}
		o.Home = filepath.Join(home, ".tollgate")
	}

	cat, err := loadCatalogs(o.Catalogs)
	if err != nil {
		return err
	}
	owners := map[string]string{}
	for _, r := range o.AgentOwners {
		agent, person, ok := strings.Cut(r, "=")
		if !ok || agent == "" || person == "" {
			return fmt.Errorf("--agent-owner %q: want AGENT=PERSON", r)
		}
		owners[agent] = person
	}

	var st store.Store
	keys := map[string]ed25519.PublicKey{}
	switch {
	case o.Dev && o.Redis != "":
		return errors.New("--dev uses the embedded store; drop --redis, or drop --dev")
	case o.Dev:
		if o.Listen == "" {
			o.Listen = "127.0.0.1:7443"
		}
		if !identity.Loopback(o.Listen) || (o.AdminListen != "" && !identity.Loopback(o.AdminListen)) {
			return fmt.Errorf("--dev listens on loopback only; %s is not", o.Listen)
		}
		if o.ExecutorListen == "" {
			o.ExecutorListen = "127.0.0.1:7444"
		}
		if !identity.Loopback(o.ExecutorListen) {
			return fmt.Errorf("--dev listens on loopback only; %s is not", o.ExecutorListen)
		}
		dir := filepath.Join(o.Home, "dev")
		b, err := identity.MintDev(dir, DevUsers, o.Issuer, o.Audience, 30*24*time.Hour, time.Now())
		if err != nil {
			return fmt.Errorf("mint dev identities: %w", err)
		}
		if o.ExecutorCert == "" {
			pki, err := identity.MintDevPKI(filepath.Join(dir, "pki"), o.TrustDomain, devExecutors, 30*24*time.Hour, time.Now())
			if err != nil {
				return fmt.Errorf("mint dev certificates: %w", err)
			}
			o.ExecutorCert, o.ExecutorKey, o.ExecutorCA = pki.Server.Cert, pki.Server.Key, pki.CA
		}
		keys[b.KeyID] = b.PublicKey
		if o.EscalateTo == "" {
			o.EscalateTo = "finance"
		}
		if o.Policy == "" {
			o.Policy = filepath.Join(dir, "policy.csv")
			if _, err := os.Stat(o.Policy); errors.Is(err, os.ErrNotExist) {
				if err := os.WriteFile(o.Policy, examples.Policy, 0o644); err != nil {
					return fmt.Errorf("write dev policy: %w", err)
				}
			}
		}
		st = memstore.New(memstore.Config{})
		fmt.Fprintf(mc.Stdout, `Tollgate control plane (dev mode)
  store:   in memory — nothing survives this process
  tokens:  %s (users %s)
  policy:  %s (edit it: reloaded within a second)
  certs:   %s (executors %s)
  use:     approvectl --as alice run graph-ask-demo --wait
           TOLLGATE_TOKEN=$(cat %s) approvectl asks
`, filepath.Join(dir, "tokens"), strings.Join(DevUsers, ", "), o.Policy, filepath.Join(dir, "pki"), strings.Join(devExecutors, ", "), b.TokenPaths["alice"])
	case o.Redis != "":
		if mc.OpenRedis == nil {
			return errors.New("this build has no Redis store")
		}
		if o.Listen == "" {
			return errors.New("--listen is required with --redis")
		}
		if st, err = mc.OpenRedis(ctx, o.Redis, o.AllowVolatile, log); err != nil {
			return err
		}
	default:
		return errors.New("choose a store: --dev (embedded, for trying it out) or --redis URL")
	}
	defer st.Close()
	for _, path := range o.JWTKeys {
		k, err := identity.LoadPublicKeyPEM(path)
		if err != nil {
			return err
		}
		keys[strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))] = k
	}
	if len(keys) == 0 {
		return errors.New("no JWT keys: pass --jwt-key FILE (or use --dev)")
	}
	verifier, err := identity.NewVerifier(identity.Config{Issuer: o.Issuer, Audience: o.Audience, Keys: keys, Leeway: 30 * time.Second})
	if err != nil {
		return err
	}
	if o.GrantKey == "" && o.Dev {
		o.GrantKey = filepath.Join(o.Home, "dev", "grant.key")
	}
	if o.GrantKey == "" {
		return errors.New("--grant-key FILE is required: the Ed25519 key that signs grants for side-effecting steps (created there, with FILE's .pub for executors, if it does not exist)")
	}
	gpriv, err := loadOrCreateKey(o.GrantKey, true)
	if err != nil {
		return err
	}
	if o.Policy == "" {
		return errors.New("--policy FILE is required: who may decide what (see examples/policy.csv)")
	}
	if o.PolicyMaxDrop <= 0 || o.PolicyMaxDrop > 1 {
		return fmt.Errorf("--policy-max-drop %v: give a share of the rules, 0 < S ≤ 1", o.PolicyMaxDrop)
	}
	az, err := authz.New(authz.Config{ModelPath: o.PolicyModel, PolicyPath: o.Policy, Log: log,
		AllowEmpty: o.PolicyAllowEmpty, MaxDrop: o.PolicyMaxDrop})
	if errors.Is(err, authz.ErrEmptyPolicy) {
		return fmt.Errorf("policy: %w (start with --policy-allow-empty if a policy that denies every decision is meant)", err)
	}
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	var notifier *webhook.Notifier
	var srvRef *Server
	if len(o.Webhooks) > 0 {
		var eps []webhook.Endpoint
		for _, w := range o.Webhooks {
			secret, err := os.ReadFile(w.SecretFile)
			if err != nil {
				return fmt.Errorf("webhook %s: read secret: %w", w.Name, err)
			}
			eps = append(eps, webhook.Endpoint{Name: w.Name, URL: w.URL, Secret: []byte(strings.TrimSpace(string(secret))), Roles: w.Roles, People: w.People, Kinds: w.Kinds})
		}
		notifier, err = webhook.New(webhook.Config{Log: log, Recorder: webhook.RecorderFunc(func(ctx context.Context, d webhook.Delivery) error {
			return approvals.DeliveryJournal{Runner: srvRef.Runner}.Delivered(ctx, d)
		})}, eps)
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
	}
	var execTLS *tls.Config
	if o.ExecutorListen != "" {
		if execTLS, err = identity.ServerTLS(o.ExecutorCert, o.ExecutorKey, o.ExecutorCA); err != nil {
			return fmt.Errorf("executor listener: %w (give --executor-cert, --executor-key and --executor-ca)", err)
		}
	}
	if o.TraceSample <= 0 || o.TraceSample > 1 {
		return fmt.Errorf("--trace-sample %v: give a share of runs, 0 < S ≤ 1", o.TraceSample)
	}
	tracing, err := telemetry.New(ctx, telemetry.Config{Endpoint: o.OTLPEndpoint, Sample: o.TraceSample, Service: "tollgate-controlplane", Log: log})
	if err != nil {
		return err
	}
	defer flushSpans(tracing, log)
	var observers []runner.Observer
	var met *metrics.Metrics
	if o.AdminListen != "" {
		// The server is built below; nothing scrapes before it serves.
		caches := func() map[string]lru.Stats { return srvRef.Caches() }
		watches := func() (int, int64) { w := srvRef.Watches(); return w.Active, w.Refused }
		if met, err = metrics.New(metrics.Config{Store: st, Log: log, Caches: caches, Watches: watches, Policy: az}); err != nil {
			return err
		}
		defer met.Shutdown(context.Background())
		observers = append(observers, met)
	}
	srv := NewServer(Config{Store: st, Verifier: verifier, Catalog: cat, Skills: ExampleSkills(), Policy: az, Domain: o.Domain, Owners: owners,
		Log: log, Engine: engine.Config{DefaultExpiry: o.AskExpiry}, Reflection: o.Reflection,
		SigningKey: gpriv, KeyID: "grant", LeaseTTL: o.LeaseTTL, GateGrantTTL: o.GateGrantTTL, ExecutorTLS: execTLS, TrustDomain: o.TrustDomain,
		EscalateTo: o.EscalateTo, Notifier: optionalNotifier(notifier), Observers: observers, Tracing: tracing,
		PlanCache: o.PlanCache, MaxWatchesPerCaller: o.MaxWatchesPerCaller})
	srvRef = srv
	if err := srv.Runner.Recover(ctx); err != nil {
		return err
	}

	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	errc := make(chan error, 3)
	// Background work owned here: the policy watch, the deadline pass,
	// the pass that offers again what a commit of unknown outcome made
	// runnable, and the webhook sender. Each ends with bg and is waited for.
	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	defer func() { stopBG(); bgWG.Wait() }()
	bgWG.Go(func() { _ = az.Watch(bg) })
	bgWG.Go(func() { _ = srv.Runner.Sweep(bg, max(o.DeadlinePass, time.Second)) })
	bgWG.Go(func() { _ = srv.Runner.Resettling(bg, max(o.LeaseTTL/4, 100*time.Millisecond)) })
	if notifier != nil {
		bgWG.Go(func() { _ = notifier.Run(bg) })
	}
	go func() { errc <- srv.Serve(lis) }()
	var execLis net.Listener
	if o.ExecutorListen != "" {
		if execLis, err = net.Listen("tcp", o.ExecutorListen); err != nil {
			lis.Close()
			return fmt.Errorf("executor listen: %w", err)
		}
		go func() { errc <- srv.ServeExecutors(execLis) }()
	} else {
		log.Warn("no --executor-listen: no executor can connect, so runs with tool steps stay blocked")
	}
	var admin *http.Server
	adminAddr := ""
	if o.AdminListen != "" {
		if admin, adminAddr, err = startAdmin(o.AdminListen, AdminMux(AdminConfig{Metrics: met.Handler(), PProf: o.PProf}), errc); err != nil {
			lis.Close()
			if execLis != nil {
				execLis.Close()
			}
			return err
		}
	}
	execAddr := ""
	if execLis != nil {
		execAddr = execLis.Addr().String()
	}
	log.Info("serving", "listen", lis.Addr().String(), "executor_listen", execAddr, "admin", adminAddr, "dev", o.Dev)
	execCtx, stopExec := context.WithCancel(ctx)
	defer stopExec()
	execDone := make(chan struct{})
	if o.Dev && mc.DevExecutor != nil {
		pki := filepath.Join(o.Home, "dev", "pki")
		clientTLS, err := identity.ClientTLS(filepath.Join(pki, "executor-"+devExecutors[0]+".pem"), filepath.Join(pki, "executor-"+devExecutors[0]+".key"), o.ExecutorCA, "")
		if err != nil {
			return fmt.Errorf("dev executor certificate: %w", err)
		}
		go func() {
			defer close(execDone)
			d := DevExecutor{Addr: execLis.Addr().String(), TLS: clientTLS, GrantKey: gpriv.Public().(ed25519.PublicKey), Home: o.Home, Log: log, OTLPEndpoint: o.OTLPEndpoint}
			if err := mc.DevExecutor(execCtx, d); err != nil && execCtx.Err() == nil {
				log.Error("dev executor stopped", "error", err)
			}
		}()
	} else {
		close(execDone)
	}
	if mc.Ready != nil {
		mc.Ready(lis.Addr().String())
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	log.Info("shutting down: NOT_SERVING, draining", "timeout", o.DrainTimeout)
	stopExec()
	<-execDone
	drain, cancel := context.WithTimeout(context.Background(), o.DrainTimeout)
	defer cancel()
	if admin != nil {
		_ = admin.Shutdown(drain)
	}
	srv.Shutdown(drain)
	return nil
}

// flushSpans exports the spans still queued at shutdown.
func flushSpans(t *telemetry.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("spans not flushed", "error", err)
	}
}

// loadConfig reads a YAML config; flags given on the command line win.
func loadConfig(path string, o *Options, fs *flag.FlagSet) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var fromFile Options
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&fromFile); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	merge := func(name string, apply func()) {
		if !set[name] {
			apply()
		}
	}
	merge("listen", func() { setIf(&o.Listen, fromFile.Listen) })
	merge("admin-listen", func() { setIf(&o.AdminListen, fromFile.AdminListen) })
	merge("redis", func() { setIf(&o.Redis, fromFile.Redis) })
	merge("home", func() { setIf(&o.Home, fromFile.Home) })
	merge("grant-key", func() { setIf(&o.GrantKey, fromFile.GrantKey) })
	merge("executor-listen", func() { setIf(&o.ExecutorListen, fromFile.ExecutorListen) })
	merge("executor-cert", func() { setIf(&o.ExecutorCert, fromFile.ExecutorCert) })
	merge("executor-key", func() { setIf(&o.ExecutorKey, fromFile.ExecutorKey) })
	merge("executor-ca", func() { setIf(&o.ExecutorCA, fromFile.ExecutorCA) })
	merge("trust-domain", func() { setIf(&o.TrustDomain, fromFile.TrustDomain) })
	merge("jwt-issuer", func() { setIf(&o.Issuer, fromFile.Issuer) })
	merge("jwt-audience", func() { setIf(&o.Audience, fromFile.Audience) })
	merge("allow-volatile-store", func() { o.AllowVolatile = o.AllowVolatile || fromFile.AllowVolatile })
	merge("dev", func() { o.Dev = o.Dev || fromFile.Dev })
	merge("reflection", func() { o.Reflection = o.Reflection || fromFile.Reflection })
	merge("pprof", func() { o.PProf = o.PProf || fromFile.PProf })
	merge("otlp-endpoint", func() { setIf(&o.OTLPEndpoint, fromFile.OTLPEndpoint) })
	merge("trace-sample", func() {
		if fromFile.TraceSample > 0 {
			o.TraceSample = fromFile.TraceSample
		}
	})
	merge("ask-expiry", func() {
		if fromFile.AskExpiry > 0 {
			o.AskExpiry = fromFile.AskExpiry
		}
	})
	merge("gate-grant-ttl", func() {
		if fromFile.GateGrantTTL > 0 {
			o.GateGrantTTL = fromFile.GateGrantTTL
		}
	})
	o.Catalogs = append(o.Catalogs, fromFile.Catalogs...)
	o.JWTKeys = append(o.JWTKeys, fromFile.JWTKeys...)
	o.AgentOwners = append(o.AgentOwners, fromFile.AgentOwners...)
	merge("policy", func() { setIf(&o.Policy, fromFile.Policy) })
	merge("policy-model", func() { setIf(&o.PolicyModel, fromFile.PolicyModel) })
	merge("policy-allow-empty", func() { o.PolicyAllowEmpty = o.PolicyAllowEmpty || fromFile.PolicyAllowEmpty })
	merge("policy-max-drop", func() {
		if fromFile.PolicyMaxDrop != 0 {
			o.PolicyMaxDrop = fromFile.PolicyMaxDrop
		}
	})
	merge("domain", func() { setIf(&o.Domain, fromFile.Domain) })
	merge("escalate-to", func() { setIf(&o.EscalateTo, fromFile.EscalateTo) })
	o.Webhooks = append(o.Webhooks, fromFile.Webhooks...)
	merge("plan-cache", func() {
		if fromFile.PlanCache > 0 {
			o.PlanCache = fromFile.PlanCache
		}
	})
	merge("max-watches-per-caller", func() {
		if fromFile.MaxWatchesPerCaller > 0 {
			o.MaxWatchesPerCaller = fromFile.MaxWatchesPerCaller
		}
	})
	return nil
}

func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// loadCatalogs merges catalog files; none means the built-in one.
func loadCatalogs(paths []string) (*compiler.Catalog, error) {
	if len(paths) == 0 {
		return compiler.ParseCatalog(examples.Catalog)
	}
	var tools []compiler.ToolInfo
	for _, p := range slices.Compact(slices.Sorted(slices.Values(paths))) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read catalog: %w", err)
		}
		c, err := compiler.ParseCatalog(b)
		if err != nil {
			return nil, fmt.Errorf("catalog %s: %w", p, err)
		}
		for _, s := range c.Servers() {
			for _, n := range c.Tools(s) {
				t, _ := c.Lookup(s, n)
				tools = append(tools, t)
			}
		}
	}
	return compiler.NewCatalog(tools), nil
}

// loadOrCreateKey reads an Ed25519 private key (PKCS#8 PEM); when create
// is set and the file does not exist, it makes one (0600) and writes the
// public half next to it (.pub) for executors to trust.
func loadOrCreateKey(path string, create bool) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		_, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, err
		}
		pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, fmt.Errorf("write grant key: %w", err)
		}
		if err := os.WriteFile(strings.TrimSuffix(path, filepath.Ext(path))+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
			return nil, fmt.Errorf("write grant public key: %w", err)
		}
		return priv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read grant key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("grant key %s: not PEM", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("grant key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("grant key %s: not an Ed25519 key", path)
	}
	return priv, nil
}

// optionalNotifier keeps a nil *webhook.Notifier from becoming a non-nil
// Notifier interface.
func optionalNotifier(n *webhook.Notifier) approvals.Notifier {
	if n == nil {
		return nil
	}
	return n
}
