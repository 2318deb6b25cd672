package controlplane

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/gatesvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Options are the control plane's settings. One table (settings) names
// each one as a flag and as a config-file key, with its default and its
// help; a setting given on the command line wins over the file.
type Options struct {
	Listen        string
	AdminListen   string
	PProf         bool    // net/http/pprof on the admin listener
	OTLPEndpoint  string  // OTLP gRPC collector for traces; empty: off
	OTLPInsecure  bool    // no TLS to the collector (always so on loopback)
	TraceSample   float64 // share of runs traced
	Redis         string
	RedisPassword string // a file holding the password (a mounted Secret)
	RedisCA       string // CA bundle (PEM) a rediss:// server's certificate must chain to
	AllowVolatile bool
	Dev           bool
	Home          string
	Catalogs      []string
	Issuer        string
	Audience      string
	JWTKeys       []string // PEM public keys; the key id is the file name without extension
	// People signed in at an OpenID provider (identity.OIDCVerifier);
	// OIDCIssuer empty: off. OIDCAudience empty: OIDCClientID.
	OIDCIssuer      string
	OIDCClientID    string
	OIDCAudience    string
	OIDCPersonClaim string
	OIDCGroupsClaim string
	Policy          string // casbin policy CSV (pkg/authz); watched and reloaded
	PolicyModel     string // casbin model; default: the built-in one
	// PolicyAllowEmpty accepts a policy with no p rule; PolicyMaxDrop is
	// the share of the rules in force one reload may drop (authz.Guard).
	PolicyAllowEmpty bool
	PolicyMaxDrop    float64
	Domain           string   // the policy domain of this plane's runs
	AgentOwners      []string // AGENT=PERSON
	EscalateTo       string   // role an ask nobody may decide goes to
	DeadlinePass     time.Duration
	Webhooks         []WebhookOption // config file only: secrets are read from files
	AskExpiry        time.Duration
	Reflection       bool
	DrainTimeout     time.Duration
	DrainDelay       time.Duration // NOT_SERVING this long before the drain begins
	TLSCert          string        // the API listener's certificate (PEM); empty: plain TCP
	TLSKey           string
	GrantKey         string // PEM (PKCS#8) Ed25519 private key that signs grants
	LeaseTTL         time.Duration
	GateGrantTTL     time.Duration
	Replica          string // this replica's name among those sharing the store
	// The executor listener: mTLS, ExecutorService only.
	ExecutorListen string
	ExecutorCert   string // the listener's certificate (PEM)
	ExecutorKey    string
	ExecutorCA     string // CA bundle that executors' client certificates chain to
	TrustDomain    string
	// Bounds on what callers can make a replica hold in memory.
	PlanCache           int
	MaxWatchesPerCaller int
	// The web inbox (internal/web): its listener, its address as
	// browsers reach it, the key that seals its sessions and signs its
	// links (shared by every replica), and how links and sessions behave.
	WebListen       string
	WebURL          string
	WebKey          string
	WebLinkSignsIn  bool
	WebSessionTTL   time.Duration
	WebLinkTTL      time.Duration
	WebClientSecret string // a file holding the OpenID client secret of a confidential web client
	// Slack (internal/slackapp): the bot token and signing secret are
	// read from files, never given on a command line.
	SlackTokenFile  string
	SlackSecretFile string
	SlackChannel    string
	SlackUsers      []string // SLACK_USER_ID=person
	SlackEmail      bool
	SlackTeam       string
	SlackDM         bool
	SlackAPIURL     string
	// Email (internal/emailnotify): the password is read from a file.
	SMTPAddr         string
	SMTPFrom         string
	SMTPTLS          string
	SMTPUser         string
	SMTPPasswordFile string
	SMTPServerName   string
	SMTPCA           string
	Emails           []string // PERSON=ADDRESS
	EmailIsPerson    bool
	SkillsDir        string
	// The MCP gateway (mcpgw): its listener, and whether a call that
	// waits for a person answers at once instead.
	MCPListen  string
	MCPPending bool
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

// setting is one row of the table: where it is kept (a pointer into
// Options), its flag (empty: config file only), its config-file key, its
// default and its help. A file value that is the zero value of its type
// leaves the setting as it is; a list in the file adds to the flags'.
type setting struct {
	value any // *string, *bool, *int, *float64, *time.Duration, *[]string, *[]WebhookOption
	flag  string
	key   string
	def   any // nil: the zero value
	help  string
}

// settings is the one table of the control plane's settings.
func (o *Options) settings() []setting {
	return []setting{
		{&o.Listen, "listen", "listen", "", "gRPC listen address (default 127.0.0.1:7443 with --dev)"},
		{&o.AdminListen, "admin-listen", "admin_listen", "", "admin HTTP address for /healthz and /metrics (Prometheus) (empty: off)"},
		{&o.OTLPEndpoint, "otlp-endpoint", "otlp_endpoint", "", "send traces by OTLP gRPC to this HOST:PORT (Jaeger, a collector); empty: no tracing"},
		{&o.OTLPInsecure, "otlp-insecure", "otlp_insecure", false, "send traces without TLS (a collector in the same cluster; a loopback endpoint is always plain)"},
		{&o.TraceSample, "trace-sample", "trace_sample", 1.0, "share of runs traced, 0 < S ≤ 1; executors follow the decision through each lease"},
		{&o.PProf, "pprof", "pprof", false, "serve net/http/pprof under /debug/pprof/ on the admin listener (needs --admin-listen)"},
		{&o.Redis, "redis", "redis", "", "Redis URL, e.g. redis://127.0.0.1:6379/0 or unix:///run/redis.sock; a Redis Cluster: redis+cluster://[USER:PASS@]HOST:PORT[?addr=HOST2:PORT2&addr=…] (rediss+cluster:// for TLS; one reachable node is enough)"},
		{&o.RedisPassword, "redis-password-file", "redis_password_file", "", "file holding the Redis password (a mounted Secret), so it is on no command line; the --redis URL then carries none"},
		{&o.RedisCA, "redis-ca", "redis_ca", "", "CA bundle (PEM) a rediss:// server's certificate must chain to (default: the system roots)"},
		{&o.AllowVolatile, "allow-volatile-store", "allow_volatile_store", false, "accept a Redis that keeps nothing on disk (appendonly no)"},
		{&o.Dev, "dev", "dev", false, "development mode: memory store, dev key and tokens, loopback only"},
		{&o.Home, "home", "home", "", "state directory (default $TOLLGATE_HOME or ~/.tollgate)"},
		{&o.MCPListen, "mcp-listen", "mcp_listen", "", "MCP gateway address: agents call the executors' tools (and run skills) over MCP streamable HTTP at http://ADDR/mcp with bearer tokens; side-effecting calls wait for approval (default 127.0.0.1:7446 with --dev; empty: off). Served with --tls-cert when given"},
		{&o.MCPPending, "mcp-pending", "mcp_pending", false, "a gateway call that must wait for a person answers at once with the ask and where to answer it (for MCP clients that cannot hold a call open); the outcome is read with tollgate.run_status or the same call with the same idempotency key"},
		{&o.SkillsDir, "skills-dir", "skills_dir", "", "directory whose SKILL.md files (one per folder, the folder naming a skill without front matter `name`) are published to the skill registry at start and whenever one changes; a skill whose file leaves it is deleted (its history kept). --dev without it: the example skills"},
		{&o.Catalogs, "catalog", "catalogs", nil, "tool catalog file (repeatable; default: the built-in example catalog); read again when it changes; executors' advertised annotations make it stricter, never laxer"},
		{&o.Issuer, "jwt-issuer", "jwt_issuer", "tollgate-dev", "required JWT issuer"},
		{&o.Audience, "jwt-audience", "jwt_audience", "tollgate", "required JWT audience"},
		{&o.JWTKeys, "jwt-key", "jwt_keys", nil, "Ed25519 public key PEM that signs tokens (repeatable)"},
		{&o.OIDCIssuer, "oidc-issuer", "oidc_issuer", "", "OpenID provider whose ID tokens sign people in (exact issuer URL; discovery and JWKS; the start fails if it is unreachable); empty: off"},
		{&o.OIDCClientID, "oidc-client-id", "oidc_client_id", "", "client id people sign in with (approvectl login); the default --oidc-audience"},
		{&o.OIDCAudience, "oidc-audience", "oidc_audience", "", "audience the provider's tokens must carry (default: --oidc-client-id)"},
		{&o.OIDCPersonClaim, "oidc-person-claim", "oidc_person_claim", "sub", "claim that names the person: sub or email (email counts only when email_verified is true)"},
		{&o.OIDCGroupsClaim, "oidc-groups-claim", "oidc_groups_claim", "groups", "claim listing the person's groups; group NAME is the policy member group:NAME"},
		{&o.Policy, "policy", "policy", "", "policy file (CSV, pkg/authz): roles, limits, quorum, separation of duties, delegations; reloaded on change (--dev: examples/policy.csv copied to the dev folder)"},
		{&o.PolicyModel, "policy-model", "policy_model", "", "casbin model file (default: the built-in one)"},
		{&o.PolicyAllowEmpty, "policy-allow-empty", "policy_allow_empty", false, "accept a policy with no p rule, which denies every decision (without it such a file fails the start, and a reload to it keeps the last good policy)"},
		{&o.PolicyMaxDrop, "policy-max-drop", "policy_max_drop", authz.DefaultMaxDrop, "largest share of the rules in force, 0 < S ≤ 1, one policy reload may drop; a reload dropping more keeps the last good policy and logs an error (1: no limit)"},
		{&o.Domain, "domain", "domain", "acme", "policy domain of this control plane's runs"},
		{&o.EscalateTo, "escalate-to", "escalate_to", "", "role an ask goes to when policy leaves nobody eligible and its recipe names no escalation (--dev: finance)"},
		{&o.DeadlinePass, "deadline-pass", "deadline_pass", 15 * time.Second, "how often the deadline pass applies due reminders, escalations and expiries (readers apply them anyway)"},
		{&o.AgentOwners, "agent-owner", "agent_owners", nil, "AGENT=PERSON: PERSON owns the agent principal AGENT; separation of duties excludes both (repeatable)"},
		{&o.Webhooks, "", "webhooks", nil, ""},
		{&o.AskExpiry, "ask-expiry", "ask_expiry", engine.DefaultAskExpiry, "deadline of an ask whose recipe sets none"},
		{&o.Reflection, "reflection", "reflection", false, "serve gRPC reflection"},
		{&o.GrantKey, "grant-key", "grant_key", "", "Ed25519 private key (PEM) that signs grants; executors trust its public half (--dev: created in the dev folder)"},
		{&o.DrainTimeout, "drain-timeout", "drain_timeout", 10 * time.Second, "how long shutdown waits for in-flight RPCs"},
		{&o.DrainDelay, "drain-delay", "drain_delay", time.Duration(0), "on shutdown, report NOT_SERVING (gRPC health, /readyz) and keep serving this long before draining, so load balancers stop sending first (Kubernetes: a few readiness periods)"},
		{&o.TLSCert, "tls-cert", "tls_cert", "", "certificate (PEM) of the API listener; read again when the file changes (a rotated Secret). Without it the API is plain TCP: for loopback, or behind a proxy or mesh that terminates TLS"},
		{&o.TLSKey, "tls-key", "tls_key", "", "private key (PEM) of --tls-cert"},
		{&o.LeaseTTL, "lease-ttl", "lease_ttl", 10 * time.Second, "a lease whose executor sends no heartbeat for this long is lost; a replica renews its liveness every quarter of it"},
		{&o.Replica, "replica", "replica", "", "this replica's name, recorded in its leases, unique among the replicas on one store: letters, digits, . _ - (default: cp- and a fresh token per process)"},
		{&o.GateGrantTTL, "gate-grant-ttl", "gate_grant_ttl", gatesvc.DefaultGateGrantTTL, "how long the grant of an approved gate (approvectl gate) stays valid after the approval"},
		{&o.ExecutorListen, "executor-listen", "executor_listen", "", "executor listener address: mTLS, ExecutorService only (default 127.0.0.1:7444 with --dev; empty: no executors)"},
		{&o.ExecutorCert, "executor-cert", "executor_cert", "", "certificate (PEM) of the executor listener (--dev: minted in the dev folder)"},
		{&o.ExecutorKey, "executor-key", "executor_key", "", "private key (PEM) of --executor-cert"},
		{&o.ExecutorCA, "executor-ca", "executor_ca", "", "CA bundle (PEM) executors' client certificates must chain to"},
		{&o.TrustDomain, "trust-domain", "trust_domain", identity.DefaultTrustDomain, "executors are spiffe://TRUST-DOMAIN/executor/NAME in their certificate's URI SAN"},
		{&o.PlanCache, "plan-cache", "plan_cache", runner.DefaultPlanCache, "plans kept in memory in each plan cache (engines, compilations, plan views), least recently used evicted; an evicted plan is read from the store again"},
		{&o.MaxWatchesPerCaller, "max-watches-per-caller", "max_watches_per_caller", api.DefaultMaxWatchesPerCaller, "watch streams (WatchRun, WatchAsks) one caller may hold open at once; more are refused with RESOURCE_EXHAUSTED"},
		{&o.WebListen, "web-listen", "web_listen", "", "web inbox address: people sign in (--oidc-issuer, or the dev picker) and decide in a browser (default 127.0.0.1:7445 with --dev; empty: off). Served with --tls-cert when given"},
		{&o.WebURL, "web-url", "web_url", "", "the web inbox's address as browsers reach it (https://inbox.example.com): links in notices and the OpenID redirect are made from it; plain http only on loopback (default: http://--web-listen when that is loopback)"},
		{&o.WebKey, "web-key", "web_key", "", "file holding at least 32 random bytes that seal web sessions and sign links and CSRF tokens; every replica behind one --web-url shares it (--dev: made in the dev folder)"},
		{&o.WebLinkSignsIn, "web-link-signs-in", "web_link_signs_in", false, "a notice's single-use link alone lets its person see and decide its one ask (one-click approval from email); off: the holder signs in as that person first"},
		{&o.WebSessionTTL, "web-session-ttl", "web_session_ttl", 8 * time.Hour, "how long a web sign-in lasts; the provider's groups are those at sign-in"},
		{&o.WebLinkTTL, "web-link-ttl", "web_link_ttl", 24 * time.Hour, "how long a notice's link is good for (never past its ask's deadline)"},
		{&o.SlackTokenFile, "slack-token-file", "slack_token_file", "", "file holding the Slack bot token (xoxb-…): asks are posted to Slack (--slack-channel, --slack-dm); empty: no Slack"},
		{&o.SlackSecretFile, "slack-signing-secret-file", "slack_signing_secret_file", "", "file holding the Slack app's signing secret: Approve and Reject in Slack decide (POST /slack/interactions on the web listener); empty: buttons are not offered"},
		{&o.SlackChannel, "slack-channel", "slack_channel", "", "Slack channel id asks are posted to (its members see each packet)"},
		{&o.SlackUsers, "slack-user", "slack_users", nil, "SLACK_USER_ID=PERSON: who a Slack user decides as (repeat); an unmapped user cannot decide"},
		{&o.SlackEmail, "slack-email-is-person", "slack_email_is_person", false, "a Slack user whose email Slack confirmed decides as that email (use with --oidc-person-claim email)"},
		{&o.SlackTeam, "slack-team", "slack_team", "", "only users of this Slack workspace (team id) may decide"},
		{&o.SlackDM, "slack-dm", "slack_dm", false, "also send each person an ask names (and --slack-user maps) a direct message with their own single-use link"},
		{&o.SlackAPIURL, "slack-api-url", "slack_api_url", "", "Slack Web API base URL (default https://slack.com/api/)"},
		{&o.SMTPAddr, "smtp-addr", "smtp_addr", "", "SMTP server (HOST:PORT) asks are mailed through, each to its people with their own single-use link (needs --web-listen); empty: no email"},
		{&o.SMTPFrom, "smtp-from", "smtp_from", "", "the From address of the mail"},
		{&o.SMTPTLS, "smtp-tls", "smtp_tls", "starttls", "starttls, tls (implicit) or none (loopback only)"},
		{&o.SMTPUser, "smtp-user", "smtp_user", "", "SMTP user (PLAIN, over TLS only)"},
		{&o.SMTPPasswordFile, "smtp-password-file", "smtp_password_file", "", "file holding the SMTP password"},
		{&o.SMTPServerName, "smtp-server-name", "smtp_server_name", "", "the name the SMTP server's certificate must carry (default: the host of --smtp-addr)"},
		{&o.SMTPCA, "smtp-ca", "smtp_ca", "", "CA bundle (PEM) the SMTP server's certificate must chain to (default: the system's)"},
		{&o.Emails, "email", "emails", nil, "PERSON=ADDRESS: where a person's mail goes (repeat)"},
		{&o.EmailIsPerson, "email-is-person", "email_is_person", false, "a person named by an email address is mailed there (with --oidc-person-claim email)"},
		{&o.WebClientSecret, "web-oidc-client-secret-file", "web_oidc_client_secret_file", "", "file holding the client secret, when the web inbox signs in as a confidential client (--oidc-client-id); empty: a public client, PKCE alone"},
	}
}

// register defines every setting that has a flag on fs, and --config,
// whose value it returns.
func (o *Options) register(fs *flag.FlagSet) *string {
	configFile := fs.String("config", "", "YAML config file (flags override it)")
	for _, s := range o.settings() {
		if s.flag == "" {
			continue
		}
		switch p := s.value.(type) {
		case *string:
			fs.StringVar(p, s.flag, s.def.(string), s.help)
		case *bool:
			fs.BoolVar(p, s.flag, s.def.(bool), s.help)
		case *int:
			fs.IntVar(p, s.flag, s.def.(int), s.help)
		case *float64:
			fs.Float64Var(p, s.flag, s.def.(float64), s.help)
		case *time.Duration:
			fs.DurationVar(p, s.flag, s.def.(time.Duration), s.help)
		case *[]string:
			fs.Var(listFlag{p}, s.flag, s.help)
		default:
			panic(fmt.Sprintf("setting %s: no flag for %T", s.flag, s.value)) // a bug in the table
		}
	}
	return configFile
}

// load reads a YAML config file into o: each key must name a setting; a
// setting given on the command line keeps its flag's value.
func (o *Options) load(path string, fs *flag.FlagSet) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("config %s: line %d: want a mapping of settings", path, top.Line)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	byKey := map[string]setting{}
	for _, s := range o.settings() {
		byKey[s.key] = s
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		s, ok := byKey[k.Value]
		if !ok {
			return fmt.Errorf("config %s: line %d: unknown setting %q", path, k.Line, k.Value)
		}
		if first, twice := seen[k.Value]; twice {
			return fmt.Errorf("config %s: line %d: %s is set again (first on line %d)", path, k.Line, k.Value, first)
		}
		seen[k.Value] = k.Line
		if s.flag != "" && set[s.flag] && !isList(s.value) {
			continue // the command line wins
		}
		// Decode into a fresh value of the setting's type, then apply it.
		fresh := reflect.New(reflect.TypeOf(s.value).Elem())
		if err := decodeStrict(v, fresh.Interface()); err != nil {
			return fmt.Errorf("config %s: line %d: %s: %w", path, v.Line, k.Value, err)
		}
		dst := reflect.ValueOf(s.value).Elem()
		switch {
		case isList(s.value):
			dst.Set(reflect.AppendSlice(dst, fresh.Elem()))
		case !fresh.Elem().IsZero():
			dst.Set(fresh.Elem())
		}
	}
	return nil
}

// decodeStrict decodes one setting's value as yaml.v3 decodes a whole
// document with KnownFields: a field its type does not have (a misspelt
// key in a webhooks entry) is an error, not silently left out.
func decodeStrict(v *yaml.Node, into any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(into)
}

func isList(v any) bool { return reflect.TypeOf(v).Elem().Kind() == reflect.Slice }

// listFlag is a repeatable flag.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}
func (l listFlag) Set(s string) error { *l.v = append(*l.v, s); return nil }
