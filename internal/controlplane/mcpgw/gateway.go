package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/dispatch"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Starter starts runs through the one start path (runsvc.Service).
type Starter interface {
	Start(ctx context.Context, who string, in runsvc.Start) (*engine.Run, *engine.Machine, bool, error)
}

// Runs reads and follows runs (runner.Runner).
type Runs interface {
	Get(ctx context.Context, id string) (*engine.Run, *engine.Machine, error)
	Machine(ctx context.Context, digest string) (*engine.Machine, error)
	Follow(runID string) *runner.RunWatch
	Settling(runID string) bool
}

// Authority is what policy says (approvals.Desk).
type Authority interface {
	MayCall(ctx context.Context, who, server, tool string) (string, bool)
	GateRole(requester, server, tool string, args plan.Object) string
	Governed() bool
	OwnerOf(who string) string
	Requirement(ctx context.Context, run *engine.Run, a *engine.AskRun) approvals.Requirement
}

// Tools are the tools executors connected here offer (dispatch.Dispatcher).
type Tools interface {
	Offered() []dispatch.Offer
}

// Readers says who may see a run (api.Readers).
type Readers interface {
	Sees(ctx context.Context, who string, run *engine.Run) bool
}

// RunLister lists runs (the store), for a caller's pending asks.
type RunLister interface {
	ListRuns(ctx context.Context, q store.RunQuery) ([]store.Run, string, error)
}

// Config is what a Gateway needs.
type Config struct {
	Verifier *identity.Verifier
	Starter  Starter
	Runs     Runs
	Lister   RunLister
	Policy   Authority
	Tools    Tools
	Catalog  func() *compiler.Catalog
	Readers  Readers
	// Answers answers the questions the agent's client is asked through
	// elicitation, as the agent (elicit.go).
	Answers Answerer
	// Slot takes one of the caller's watch slots for a call that waits
	// (api.Watches.Slot): a waiting call is a watch, bounded alike.
	Slot func(ctx context.Context) (func(), error)
	// AskURL is the web inbox's page for an ask (nil: no web inbox).
	AskURL func(askID string) string
	// Pending answers a call that must wait for a person at once, with
	// the ask and where to answer it, instead of holding the call open.
	Pending bool
	// Progress is how often a waiting call says so again when nothing
	// changed (0: 10s).
	Progress time.Duration
	// Refresh is how often the listed tools are brought up to date with
	// the connected executors and policy (0: 2s).
	Refresh time.Duration
	Log     *slog.Logger
}

// Gateway serves MCP. Build it with New, serve Handler, and run Run for
// as long as Handler is served: Run keeps tool lists current, and its end
// ends every waiting call.
type Gateway struct {
	cfg  Config
	done chan struct{} // closed when Run returns: waits end

	mu      sync.Mutex
	servers map[string]*principalServer
	waits   sessionWaits
}

// principalServer is the MCP server one principal's sessions talk to:
// the tools it lists are the ones policy lets that principal call.
type principalServer struct {
	p      identity.Principal
	server *mcp.Server
	listed map[string]string // name → signature of what is listed
}

// maxServers bounds the principals with a server kept; an idle one is
// dropped first.
const maxServers = 4096

// New returns a Gateway.
func New(cfg Config) *Gateway {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress <= 0 {
		cfg.Progress = 10 * time.Second
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 2 * time.Second
	}
	return &Gateway{cfg: cfg, done: make(chan struct{}), servers: map[string]*principalServer{}}
}

// principalKey is the Extra key of the Principal a token verified as.
const principalKey = "tollgate.principal"

// Handler is the MCP endpoint: every request must carry a bearer token the
// control plane's Verifier accepts (401 otherwise); a session is bound to
// its principal (the SDK refuses a session's requests by anyone else).
func (g *Gateway) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(g.serverFor, &mcp.StreamableHTTPOptions{
		// Results of calls that wait are sent on the POST's event stream;
		// the event store lets a client that lost it resume.
		EventStore: mcp.NewMemoryEventStore(nil),
		// A session no request has used for this long is closed (a call
		// in flight keeps its session alive however long it waits): a
		// client that never says goodbye does not hold memory forever.
		SessionTimeout: 30 * time.Minute,
		Logger:         g.cfg.Log,
	})
	return auth.RequireBearerToken(g.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(g.endingWaits(h))
}

// endingWaits ends the calls a session still waits on when its own client
// deletes the session (it went away): the SDK closes a session only once
// its calls have returned, and a call here may wait for hours. Only the
// session's principal ends them; the SDK refuses anyone else's DELETE.
func (g *Gateway) endingWaits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodDelete && id != "" {
			if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
				g.waits.end(id, ti.UserID)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sessionWaits are the calls waiting, by session: how a deleted session's
// waits end.
type sessionWaits struct {
	mu sync.Mutex
	m  map[string]map[*waiting]bool
}

type waiting struct {
	user string
	stop context.CancelFunc
}

// add tracks a wait of session id by user; the func it returns forgets it.
func (s *sessionWaits) add(id, user string, stop context.CancelFunc) func() {
	w := &waiting{user: user, stop: stop}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[*waiting]bool{}
	}
	if s.m[id] == nil {
		s.m[id] = map[*waiting]bool{}
	}
	s.m[id][w] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.m[id], w)
		if len(s.m[id]) == 0 {
			delete(s.m, id)
		}
	}
}

// end stops session id's waits that user started.
func (s *sessionWaits) end(id, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.m[id] {
		if w.user == user {
			w.stop()
		}
	}
}

func (g *Gateway) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	p, err := g.cfg.Verifier.Verify(ctx, token)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if p.Kind == identity.KindExecutor {
		return nil, fmt.Errorf("%w: executors do not call tools here", auth.ErrInvalidToken)
	}
	// (The Verifier checked exp; the middleware's own check is off.)
	return &auth.TokenInfo{UserID: p.Issuer + "\x00" + p.Subject, Extra: map[string]any{principalKey: p}}, nil
}

// principalOf is the caller a request's token named.
func principalOf(extra *mcp.RequestExtra) (identity.Principal, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return identity.Principal{}, false
	}
	p, ok := extra.TokenInfo.Extra[principalKey].(identity.Principal)
	return p, ok && p.Subject != ""
}

// serverFor is the server of the request's principal, made (and its
// tools listed) the first time the principal is seen.
func (g *Gateway) serverFor(r *http.Request) *mcp.Server {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		return nil
	}
	p, ok := ti.Extra[principalKey].(identity.Principal)
	if !ok {
		return nil
	}
	key := p.Issuer + "\x00" + p.Subject + "\x00" + strings.Join(p.Groups, ",")
	g.mu.Lock()
	ps := g.servers[key]
	made := ps == nil
	if made {
		if len(g.servers) >= maxServers {
			g.dropIdle()
		}
		ps = &principalServer{p: p, listed: map[string]string{},
			server: mcp.NewServer(&mcp.Implementation{Name: "tollgate", Title: "Tollgate", Version: "1"}, &mcp.ServerOptions{
				Instructions: instructions, Logger: g.cfg.Log})}
		g.addOwnTools(ps.server)
		g.servers[key] = ps
	}
	g.mu.Unlock()
	if made {
		// Listed now; Run keeps it current. (The SDK asks for the
		// server on every request, so nothing more happens here.)
		g.sync(r.Context(), ps, g.cfg.Tools.Offered())
	}
	return ps.server
}

// dropIdle forgets servers no session uses; g.mu is held.
func (g *Gateway) dropIdle() {
	for k, ps := range g.servers {
		idle := true
		for range ps.server.Sessions() {
			idle = false
			break
		}
		if idle {
			delete(g.servers, k)
		}
	}
}

const instructions = `Tollgate runs these tools on its executors. Read-only tools answer at once. A side-effecting tool's call waits until a person policy names approves these exact arguments (progress notifications say who and until when), then returns the tool's real result; a rejection or an expiry comes back as a tool error with the reason. Give each distinct call its own _meta "tollgate/idempotency_key" and repeat a call with the same key to get its one outcome (never a second execution).`

// Run keeps every principal's tool list current (the executors connected
// here, policy now) until ctx ends; then every call still waiting ends.
func (g *Gateway) Run(ctx context.Context) error {
	defer close(g.done)
	return tick.Every(ctx, g.cfg.Refresh, g.refresh)
}

// refresh brings every principal's listed tools up to date.
func (g *Gateway) refresh(ctx context.Context) {
	offered := g.cfg.Tools.Offered()
	g.mu.Lock()
	all := make([]*principalServer, 0, len(g.servers))
	for _, ps := range g.servers {
		all = append(all, ps)
	}
	g.mu.Unlock()
	for _, ps := range all {
		g.sync(ctx, ps, offered)
	}
}

// sync brings ps's listed executor tools to what offered and policy say
// (the SDK tells its sessions the list changed).
func (g *Gateway) sync(ctx context.Context, ps *principalServer, offered []dispatch.Offer) {
	ctx = identity.WithPrincipal(ctx, ps.p)
	want := map[string]*mcp.Tool{}
	sig := map[string]string{}
	routes := map[string][2]string{}
	for _, o := range offered {
		name := toolName(o.Server, o.Name)
		if name == "" || want[name] != nil {
			continue // no MCP name, or two tools map to one: neither is guessed
		}
		if _, ok := g.cfg.Policy.MayCall(ctx, ps.p.Subject, o.Server, o.Name); !ok {
			continue
		}
		t, err := g.toolFor(ps.p.Subject, name, o)
		if err != nil {
			g.cfg.Log.Warn("a tool is not listed to agents", "tool", o.Server+"."+o.Name, "why", err)
			continue
		}
		b, _ := json.Marshal(t)
		want[name], sig[name], routes[name] = t, string(b), [2]string{o.Server, o.Name}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []string
	for name := range ps.listed {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(ps.listed, name)
		}
	}
	if len(gone) > 0 {
		ps.server.RemoveTools(gone...)
	}
	for name, t := range want {
		if ps.listed[name] == sig[name] {
			continue
		}
		ps.listed[name] = sig[name]
		r := routes[name]
		ps.server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return g.call(ctx, req, r[0], r[1])
		})
	}
}

// toolFor is the MCP tool listed for o: its input schema and annotations
// as the executors advertise them (in the strict view), and a description
// that says what Tollgate does with a call.
func (g *Gateway) toolFor(principal, name string, o dispatch.Offer) (*mcp.Tool, error) {
	schema := json.RawMessage(`{"type":"object"}`)
	if js := o.InputSchema.JSON(); js != "" {
		var top struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal([]byte(js), &top); err != nil || top.Type != "object" {
			return nil, errors.New(`its input schema is not {"type": "object", …}, which MCP requires`)
		}
		schema = json.RawMessage(js)
	}
	desc := strings.TrimSpace(o.Description)
	if o.SideEffect() {
		note := "Side-effecting: each call waits for a person's approval of these exact arguments"
		if role := g.cfg.Policy.GateRole(principal, o.Server, o.Name, nil); role != "" {
			note += " (role " + role + ")"
		}
		desc = strings.TrimSpace(desc + "\n\n" + note + ", then returns the tool's result.")
	}
	return &mcp.Tool{Name: name, Description: desc, InputSchema: schema, Annotations: &mcp.ToolAnnotations{
		ReadOnlyHint: o.ReadOnly, IdempotentHint: o.Idempotent, DestructiveHint: o.Destructive, OpenWorldHint: o.OpenWorld}}, nil
}
