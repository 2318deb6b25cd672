package controlplane

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/examples/mcp/servers"
	"github.com/tollgate-dev/tollgate/internal/adminhttp"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/mcpgw"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/emailnotify"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/slackapp"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// StoreOpener opens the production store for a --redis URL; it is a
// field so the binary wires the Redis store in and tests can substitute.
type StoreOpener func(ctx context.Context, c RedisConfig, log *slog.Logger) (store.Store, error)

// RedisConfig is what the --redis flags say, the files they name read.
type RedisConfig struct {
	URL           string
	AllowVolatile bool
	Password      string         // from --redis-password-file; "" when none
	RootCAs       *x509.CertPool // from --redis-ca; nil: the system roots
}

// MainConfig carries what the binary needs from its process.
type MainConfig struct {
	Stdout, Stderr io.Writer
	// Stdin is the process's standard input (nil: os.Stdin); only the
	// hidden mcp-server subcommand (servers.Command) reads it.
	Stdin     io.Reader
	Getenv    func(string) string
	OpenRedis StoreOpener
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
	OTLPInsecure bool
}

const usage = `controlplane serves the Tollgate API: plans, runs, approvals and audit.

Usage:
  controlplane --dev                       embedded store, dev identities, loopback only
  controlplane --redis URL --listen ADDR --jwt-key FILE [flags]

Flags:
`

// Run runs the control plane until ctx is cancelled, then drains.
// replicaName is what --replica accepts: it is carried in hints and keys.
var replicaName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func Run(ctx context.Context, args []string, mc MainConfig) error {
	if mc.Getenv == nil {
		mc.Getenv = os.Getenv
	}
	if len(args) > 0 && args[0] == servers.Subcommand {
		// Hidden: an example MCP server built into the binary, which
		// the --dev executor starts (devstack).
		return servers.Command(ctx, args[1:], mc.Stdin, mc.Stdout, mc.Stderr)
	}
	var o Options
	dev := defaultDev()
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.SetOutput(mc.Stderr)
	fs.Usage = func() { fmt.Fprint(mc.Stderr, usage); fs.PrintDefaults() }
	configFile := o.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *configFile != "" {
		if err := o.load(*configFile, fs); err != nil {
			return err
		}
	}
	if o.PProf && o.AdminListen == "" {
		return errors.New("--pprof is served on the admin listener: give --admin-listen too")
	}
	if o.Replica != "" && !replicaName.MatchString(o.Replica) {
		return fmt.Errorf("--replica %q: a replica's name is 1 to 64 letters, digits, '.', '_' or '-'", limits.Short(o.Replica))
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

	cat, catSum, err := readCatalogs(o.Catalogs)
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
		var key identity.DevBundle
		if st, key, err = setUpDev(mc, &o, dev); err != nil {
			return err
		}
		keys[key.KeyID] = key.PublicKey
		// The dev agents are owned by their people (separation of duties
		// keeps both out of the agent's runs), unless told otherwise.
		for agent, person := range dev.Agents {
			if _, ok := owners[agent]; !ok {
				owners[agent] = person
			}
		}
	case o.Redis != "":
		if mc.OpenRedis == nil {
			return errors.New("this build has no Redis store")
		}
		if o.Listen == "" {
			return errors.New("--listen is required with --redis")
		}
		rc, err := o.redisConfig()
		if err != nil {
			return err
		}
		if st, err = mc.OpenRedis(ctx, rc, log); err != nil {
			return err
		}
	default:
		return errors.New("choose a store: --dev (embedded, for trying it out) or --redis URL")
	}
	if o.Dev && (o.TLSCert != "" || o.TLSKey != "") {
		return errors.New("--dev serves its API as plain TCP on loopback: drop --tls-cert and --tls-key, or drop --dev")
	}
	var apiTLS *tls.Config
	switch {
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return errors.New("give --tls-cert and --tls-key together")
	case o.TLSCert != "":
		if apiTLS, err = identity.APITLS(o.TLSCert, o.TLSKey, func(err error) { log.Error("API certificate not reloaded", "error", err) }); err != nil {
			return fmt.Errorf("API listener: %w", err)
		}
	case !o.Dev && !identity.Loopback(o.Listen):
		log.Warn("the API listens on plain TCP off loopback: bearer tokens cross the network in the clear unless a proxy or mesh ends TLS in front (give --tls-cert and --tls-key)", "listen", o.Listen)
	}
	defer st.Close()
	for _, path := range o.JWTKeys {
		k, err := identity.LoadPublicKeyPEM(path)
		if err != nil {
			return err
		}
		keys[strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))] = k
	}
	var people *identity.OIDCVerifier
	if o.OIDCIssuer != "" {
		aud := cmp.Or(o.OIDCAudience, o.OIDCClientID)
		if aud == "" {
			return errors.New("--oidc-issuer needs --oidc-client-id (the client id people sign in with, which their ID tokens carry as audience)")
		}
		// Discovery and the first key fetch happen now: a provider that
		// cannot be reached fails the start. Later fetch failures are
		// logged and the cached keys keep verifying.
		if o.OIDCPersonClaim != "sub" && o.OIDCPersonClaim != "email" {
			// A claim people can set themselves at many providers (name,
			// preferred_username) would let them claim anyone's name.
			return fmt.Errorf("--oidc-person-claim %q: give sub (the provider's id for the person) or email (counted only when email_verified is true); other claims are often editable by the person", limits.Short(o.OIDCPersonClaim))
		}
		if people, err = identity.NewOIDCVerifier(ctx, identity.OIDCConfig{Issuer: o.OIDCIssuer, Audience: aud, ClientID: o.OIDCClientID,
			PersonClaim: o.OIDCPersonClaim, GroupsClaim: o.OIDCGroupsClaim, Leeway: 30 * time.Second, Log: log}); err != nil {
			return err
		}
		log.Info("people sign in at the OpenID provider", "issuer", o.OIDCIssuer, "audience", aud, "person_claim", o.OIDCPersonClaim, "groups_claim", o.OIDCGroupsClaim)
	}
	if len(keys) == 0 && people == nil {
		return errors.New("no JWT keys: pass --jwt-key FILE or --oidc-issuer URL (or use --dev)")
	}
	verifier, err := identity.NewVerifier(identity.Config{Issuer: o.Issuer, Audience: o.Audience, Keys: keys, Leeway: 30 * time.Second, OIDC: people})
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
	var hooks *webhook.Notifier
	if len(o.Webhooks) > 0 {
		var eps []webhook.Endpoint
		for _, w := range o.Webhooks {
			if strings.HasPrefix(w.Name, slackapp.EndpointPrefix) || strings.HasPrefix(w.Name, emailnotify.EndpointPrefix) {
				return fmt.Errorf("webhook %s: a name starting %s or %s names a Slack or email endpoint; choose another", w.Name, slackapp.EndpointPrefix, emailnotify.EndpointPrefix)
			}
			secret, err := os.ReadFile(w.SecretFile)
			if err != nil {
				return fmt.Errorf("webhook %s: read secret: %w", w.Name, err)
			}
			eps = append(eps, webhook.Endpoint{Name: w.Name, URL: w.URL, Secret: []byte(strings.TrimSpace(string(secret))), Roles: w.Roles, People: w.People, Kinds: w.Kinds})
		}
		hooks, err = webhook.New(webhook.Config{Log: log}, eps)
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
	}
	var execTLS *tls.Config
	if o.ExecutorListen != "" {
		if execTLS, err = identity.ServerTLS(o.ExecutorCert, o.ExecutorKey, o.ExecutorCA, func(err error) { log.Error("executor listener certificate not reloaded", "error", err) }); err != nil {
			return fmt.Errorf("executor listener: %w (give --executor-cert, --executor-key and --executor-ca)", err)
		}
	}
	if o.TraceSample <= 0 || o.TraceSample > 1 {
		return fmt.Errorf("--trace-sample %v: give a share of runs, 0 < S ≤ 1", o.TraceSample)
	}
	tracing, err := telemetry.New(ctx, telemetry.Config{Endpoint: o.OTLPEndpoint, Insecure: o.OTLPInsecure, Sample: o.TraceSample, Service: "tollgate-controlplane", Log: log})
	if err != nil {
		return err
	}
	defer flushSpans(tracing, log)
	var observers []runner.Observer
	var met *metrics.Metrics
	if o.AdminListen != "" {
		if met, err = metrics.New(metrics.Config{Store: st, Log: log, Policy: az}); err != nil {
			return err
		}
		defer met.Shutdown(context.Background())
		observers = append(observers, met)
	}
	// The web inbox listens now: its address is what notices link to.
	site, inboxLis, err := webSite(&o, apiTLS)
	if err != nil {
		return err
	}
	if o.Dev && site != nil {
		fmt.Fprintf(mc.Stdout, "  inbox:   %s (sign in as any dev user)\n", site.URL())
	}
	if inboxLis != nil {
		// Every return closes it: once served, webLis.Close does (and this
		// close is then a no-op); before that, nobody else would.
		defer inboxLis.Close()
	}
	// The MCP gateway's listener: agents reach the executors' tools here.
	mcpLis, err := mcpListen(&o, apiTLS)
	if err != nil {
		return err
	}
	if mcpLis != nil {
		defer mcpLis.Close()
		if o.Dev {
			fmt.Fprintf(mc.Stdout, "  mcp:     %s (approvectl mcp --as alice-agent)\n", mcpURL(mcpLis, apiTLS))
		}
	}
	var srv *Server
	var gateway *mcpgw.Gateway
	slack, err := newSlack(&o, site, func() *Server { return srv }, log)
	if err != nil {
		return err
	}
	email, err := newEmail(&o, site, func() *Server { return srv }, log)
	if err != nil {
		return err
	}
	var notifier approvals.Notifier
	if hooks != nil || slack != nil || email != nil {
		if hooks == nil {
			// Slack or email alone: the notices are encoded as webhooks
			// would be.
			if hooks, err = webhook.New(webhook.Config{Log: log}, nil); err != nil {
				return err
			}
		}
		notifier = notices{hooks: hooks, slack: slack, email: email, site: site, personLinks: !o.WebLinkSignsIn}
	}
	// The notifier only prepares and sends: pending deliveries live in
	// the store, and the server's deliverer sends them (approvals).
	background := []func(context.Context) error{az.Watch}
	if mcpLis != nil {
		// Built with the server below; run by it for as long as it serves.
		background = append(background, func(ctx context.Context) error { return gateway.Run(ctx) })
	}
	mount := map[string]http.Handler{}
	if slack != nil && o.SlackSecretFile != "" {
		// Clicks are taken only with the signing secret that verifies them.
		background = append(background, slack.Run)
		mount["POST /slack/interactions"] = slack.Interactions()
	}
	if len(o.Catalogs) > 0 {
		// Read again as the policy is: a ConfigMap edit takes effect
		// without a restart.
		reload := newCatalogReloader(o.Catalogs, catSum, func(c *compiler.Catalog) bool { return srv.SetCatalog(c) }, log)
		background = append(background, reload.Watch)
	}
	// Skills: the operator's directory; in --dev without one, the
	// examples built into the binary. Production serves what it is given.
	var skillsFS iofs.FS
	var skillsName string
	switch {
	case o.SkillsDir != "":
		if st, err := os.Stat(o.SkillsDir); err != nil || !st.IsDir() {
			return fmt.Errorf("--skills-dir %s: not a readable directory", o.SkillsDir)
		}
		skillsFS, skillsName = os.DirFS(o.SkillsDir), o.SkillsDir
	case o.Dev:
		skillsFS, skillsName = ExampleSkills(), "examples/skills (built in)"
	}
	srv = NewServer(Config{Store: st, Verifier: verifier, Catalog: cat, SkillsDir: skillsFS, SkillsDirName: skillsName, Policy: az, PolicyFile: o.Policy, Domain: o.Domain, Owners: owners,
		Log: log, Engine: engine.Config{DefaultExpiry: o.AskExpiry}, Reflection: o.Reflection,
		SigningKey: gpriv, KeyID: "grant", LeaseTTL: o.LeaseTTL, GateGrantTTL: o.GateGrantTTL, Replica: o.Replica, ExecutorTLS: execTLS, TrustDomain: o.TrustDomain,
		EscalateTo: o.EscalateTo, Notifier: notifier, Observers: observers, Tracing: tracing,
		PlanCache: o.PlanCache, MaxWatchesPerCaller: o.MaxWatchesPerCaller,
		SweepEvery: max(o.DeadlinePass, time.Second), DrainTimeout: max(o.DrainTimeout, time.Nanosecond), DrainDelay: o.DrainDelay,
		APITLS: apiTLS, Background: background})
	// A start that fails before the server runs stops its gRPC servers'
	// stream workers, which NewServer started.
	serving := false
	defer func() {
		if !serving {
			srv.discard()
		}
	}()
	if met != nil {
		// Its caches and watch streams, read at scrape time.
		if err := met.Report(srv); err != nil {
			return err
		}
	}
	if err := srv.Runner.Recover(ctx); err != nil {
		return err
	}
	if mcpLis != nil {
		mo := MCPOptions{Pending: o.MCPPending}
		if site != nil {
			mo.AskURL = site.AskURL
		}
		gateway = srv.MCPGateway(mo)
	}
	inbox, err := newWeb(ctx, &o, webSetup{Site: site, Server: srv, Verifier: verifier, People: people, DevUsers: dev.Users, Mount: mount, Log: log})
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var execLis net.Listener
	if o.ExecutorListen != "" {
		if execLis, err = net.Listen("tcp", o.ExecutorListen); err != nil {
			lis.Close()
			return fmt.Errorf("executor listen: %w", err)
		}
	} else {
		log.Warn("no --executor-listen: no executor can connect, so runs with tool steps stay blocked")
	}
	var admin *adminhttp.Listener
	var adminFailed <-chan error // nil: never
	adminAddr := ""
	if o.AdminListen != "" {
		// No write timeout: a CPU profile or a trace streams for as long
		// as its ?seconds= asks.
		if admin, err = adminhttp.Start(o.AdminListen, AdminMux(AdminConfig{Metrics: met.Handler(), PProf: o.PProf, Ready: readiness(srv, o.Dev && mc.DevExecutor != nil)}), 0); err != nil {
			lis.Close()
			if execLis != nil {
				execLis.Close()
			}
			return err
		}
		adminFailed, adminAddr = admin.Failed(), admin.Addr()
	}
	var webLis *adminhttp.Listener
	var webFailed <-chan error // nil: never
	webAddr := ""
	if inbox != nil {
		// No write timeout: live updates are a stream. The deferred Close
		// is a no-op after the shutdown below has closed it.
		webLis = adminhttp.Serve(inboxLis, inbox, 0)
		defer webLis.Close()
		webFailed, webAddr = webLis.Failed(), webLis.Addr()
	}
	var mcpServe *adminhttp.Listener
	var mcpFailed <-chan error // nil: never
	mcpAddr := ""
	if gateway != nil {
		// Calls wait for people: no read or write timeout (ServeStreams).
		mcpServe = adminhttp.ServeStreams(mcpLis, gateway.Handler())
		defer mcpServe.Close()
		mcpFailed, mcpAddr = mcpServe.Failed(), mcpServe.Addr()
	}
	execAddr := ""
	if execLis != nil {
		execAddr = execLis.Addr().String()
	}
	log.Info("serving", "listen", lis.Addr().String(), "executor_listen", execAddr, "admin", adminAddr, "web", webAddr, "mcp", mcpAddr, "dev", o.Dev)

	// The server runs until the dev executor, a client of its executor
	// listener, has stopped: then it drains (srv.Run owns the rest).
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	ran := make(chan error, 1)
	serving = true
	go func() { ran <- srv.Run(srvCtx, Listeners{API: lis, Executors: execLis}) }()
	execCtx, stopExec := context.WithCancel(ctx)
	defer stopExec()
	execDone := make(chan struct{})
	if o.Dev && mc.DevExecutor != nil {
		cert, key := devExecutorTLS(&o, dev)
		clientTLS, err := identity.ClientTLS(cert, key, o.ExecutorCA, "")
		if err != nil {
			stopSrv()
			<-ran
			return fmt.Errorf("dev executor certificate: %w", err)
		}
		go func() {
			defer close(execDone)
			d := DevExecutor{Addr: execLis.Addr().String(), TLS: clientTLS, GrantKey: gpriv.Public().(ed25519.PublicKey), Home: o.Home, Log: log, OTLPEndpoint: o.OTLPEndpoint, OTLPInsecure: o.OTLPInsecure}
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

	var failed error
	select {
	case <-ctx.Done():
		log.Info("shutting down: NOT_SERVING, draining", "timeout", o.DrainTimeout)
	case failed = <-adminFailed:
	case failed = <-webFailed:
	case failed = <-mcpFailed:
	case failed = <-ran: // a listener failed; the server has drained
		ran <- failed
	}
	// The web inbox stops first: its pages and streams call the server,
	// which drains next.
	if webLis != nil {
		if err := webLis.Close(); err != nil && failed == nil {
			log.Warn("web listener", "error", err)
		}
	}
	// So does the MCP gateway's: its calls start and read runs. (A call
	// still waiting ends when the server's background work does.)
	if mcpServe != nil {
		if err := mcpServe.Close(); err != nil && failed == nil {
			log.Warn("mcp listener", "error", err)
		}
	}
	stopExec()
	<-execDone
	stopSrv()
	err = <-ran
	// The admin listener stays up through the drain: probes see /readyz
	// fail (NOT_SERVING) rather than a refused connection, /healthz still
	// passes, and metrics are scraped to the end.
	if admin != nil {
		if err := admin.Close(); err != nil && failed == nil {
			log.Warn("admin listener", "error", err)
		}
	}
	if failed == nil && !errors.Is(err, ErrDrainCut) {
		failed = err // a cut drain is logged, not a failed run
	}
	return failed
}

// readiness is what /readyz reports: the API serving and, in dev mode,
// the dev executor connected too — a dev plane's runs would otherwise
// block until it is (a probe, a script waiting for the plane, must not see
// it ready before).
func readiness(srv *Server, devExecutor bool) func() error {
	return func() error {
		if err := srv.Ready(); err != nil {
			return err
		}
		if devExecutor && srv.ExecutorsConnected() == 0 {
			return errors.New("the dev executor has not connected yet")
		}
		return nil
	}
}

// redisConfig reads the files the --redis flags name.
func (o *Options) redisConfig() (RedisConfig, error) {
	rc := RedisConfig{URL: o.Redis, AllowVolatile: o.AllowVolatile}
	if o.RedisPassword != "" {
		b, err := os.ReadFile(o.RedisPassword)
		if err != nil {
			return rc, fmt.Errorf("--redis-password-file: %w", err)
		}
		if rc.Password = strings.TrimRight(string(b), "\r\n"); rc.Password == "" {
			return rc, fmt.Errorf("--redis-password-file %s is empty", o.RedisPassword)
		}
	}
	if o.RedisCA != "" {
		b, err := os.ReadFile(o.RedisCA)
		if err != nil {
			return rc, fmt.Errorf("--redis-ca: %w", err)
		}
		rc.RootCAs = x509.NewCertPool()
		if !rc.RootCAs.AppendCertsFromPEM(b) {
			return rc, fmt.Errorf("--redis-ca %s holds no PEM certificate", o.RedisCA)
		}
	}
	return rc, nil
}

// flushSpans exports the spans still queued at shutdown.
func flushSpans(t *telemetry.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("spans not flushed", "error", err)
	}
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
