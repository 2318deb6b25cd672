package approvals

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/decidable"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Policy is the policy the desk consults (pkg/authz): whether one actor
// may decide one matter now, and where an ask goes — one interface, so
// routing (and with it escalation) cannot be lost to a policy that only
// half implements it.
type Policy interface {
	// Authorize decides one actor on one matter now; an error denies.
	Authorize(ctx context.Context, req authz.Request) (authz.Decision, error)
	// AuthorizeCached is Authorize's answer, from the answers policy
	// keeps per version (the same answer at that moment): what the
	// inbox and visibility ask of many asks at once (MayDecide).
	AuthorizeCached(ctx context.Context, req authz.Request) (authz.Decision, error)
	// Route is who may decide a matter as the recipe asked, and whether
	// too few may (then the ask escalates; it is never approved by
	// default).
	Route(ctx context.Context, m authz.Matter, ask authz.RecipeAsk) (authz.Route, error)
	// RouteAsked is Route without EscalateTo unless the ask escalates:
	// at a cost that follows whom the ask asks (routing an ask as it
	// opens, its requirement).
	RouteAsked(ctx context.Context, m authz.Matter, ask authz.RecipeAsk) (authz.Route, error)
	// Holds and RolesOf answer for asks that govern no action; groups
	// are the actor's groups at the identity provider (callerGroups).
	Holds(actor, role, domain string, groups ...string) bool
	RolesOf(actor, domain string, groups ...string) []string
	// Floor is the policy's rule set for an action type.
	Floor(domain, action string) (authz.Floor, bool)
	// Deciders is who could decide an ask's matters together, or why
	// nobody could (before anyone is asked: pkg/decidable).
	Deciders(ctx context.Context, ms []authz.Matter, ask authz.RecipeAsk) (authz.Deciders, error)
	// IsRole tells a role from a person in a gate's approvers.
	IsRole(name, domain string) bool
	Version() string
}

var _ Policy = (*authz.Authorizer)(nil)

// Store is what the desk keeps in the store: standing approvals, judged
// by the store's clock.
type Store interface {
	Now(ctx context.Context) (time.Time, error)
	PutStanding(ctx context.Context, e store.Standing) error
	ListStanding(ctx context.Context) ([]store.Standing, error)
}

// Config is what a Desk needs.
type Config struct {
	// Policy decides, at decision time, who may decide an ask (I9); nil
	// allows only the requester to decide `ask me` asks, and nobody to
	// grant standing approvals. Domain is the policy domain of this
	// control plane's runs. Owners maps an agent principal that starts
	// runs to the person who owns it (separation of duties excludes both);
	// a principal not listed owns itself.
	Policy Policy
	Domain string
	// PolicyFile is the policy's file, named where a refusal says which
	// rows to add (in dev mode the dev copy, $TOLLGATE_HOME/dev/policy.csv).
	PolicyFile string
	Owners     map[string]string
	// Store holds standing approvals and gives the clock they are judged
	// by.
	Store Store
	// EscalateTo is the role an ask goes to when policy leaves nobody
	// eligible and its recipe names no escalation; "" leaves it waiting
	// (logged).
	EscalateTo string
	// Notifier, if set, prepares webhook notices, which the Desk puts in
	// the outbox (Work, outbox.go) and a Deliverer sends; AnswerCommand is
	// the command a notice tells its reader to answer the ask with (nil:
	// none).
	Notifier      Notifier
	AnswerCommand func(run *engine.Run, a *engine.AskRun) string
	// Work and Replica hold back an ask's opened notices until Opened has
	// judged it (outbox.go): they are enqueued claimed by Replica, then
	// released or finished through Work. Without both, opened notices
	// wait in the outbox at once.
	Work    WorkStore
	Replica string
	Log     *slog.Logger
}

// Desk is where asks are judged and routed: it decides at decision time
// who may make which decision on an ask, routes asks and escalates those
// nobody may decide, applies standing approvals, and puts notices in the
// outbox. It is the Runner's AskHook and Outbox, and holds no run state
// of its own: every judgement is of the run it is handed.
type Desk struct {
	cfg Config
	// check is who could decide an ask, from the same policy, domain,
	// owners and escalation role (pkg/decidable).
	check *decidable.Checker
	held  heldNotices
}

var (
	_ runner.AskHook = (*Desk)(nil)
	_ runner.Outbox  = (*Desk)(nil)
)

// New returns a Desk.
func New(cfg Config) *Desk {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var pol decidable.Policy // nil without a policy (an interface holding no Policy)
	if cfg.Policy != nil {
		pol = newCachedDeciders(cfg.Policy, time.Now)
	}
	check := decidable.New(decidable.Config{Policy: pol, Domain: cfg.Domain, Owners: cfg.Owners, PolicyFile: cfg.PolicyFile, EscalateTo: cfg.EscalateTo})
	return &Desk{cfg: cfg, check: check}
}

func (d *Desk) log() *slog.Logger { return d.cfg.Log }

// Holds reports whether who holds role, by policy, in the control plane's
// domain now (through their identity provider's groups too, when who is
// ctx's caller); with no policy, nobody holds any role.
func (d *Desk) Holds(ctx context.Context, who, role string) bool {
	return d.cfg.Policy != nil && d.cfg.Policy.Holds(who, role, d.cfg.Domain, callerGroups(ctx, who)...)
}

// IsRole reports whether policy names name as a role in the control
// plane's domain (a gate's approvers mix roles and people); with no
// policy, nothing is a role.
func (d *Desk) IsRole(name string) bool {
	return d.cfg.Policy != nil && d.cfg.Policy.IsRole(name, d.cfg.Domain)
}

// RolesOf is the roles policy gives who in the control plane's domain
// now (through their identity provider's groups too, when who is ctx's
// caller), sorted; and that domain.
func (d *Desk) RolesOf(ctx context.Context, who string) (roles []string, domain string) {
	if d.cfg.Policy != nil {
		roles = slices.Sorted(slices.Values(d.cfg.Policy.RolesOf(who, d.cfg.Domain, callerGroups(ctx, who)...)))
	}
	return slices.Compact(roles), d.cfg.Domain
}

// Audiences is who the caller is, for the inbox: the asks of these
// audiences are candidates, each then authorized in full (MayDecide).
func (d *Desk) Audiences(ctx context.Context, who string) []string {
	out := []string{"user:" + who}
	if d.cfg.Policy != nil {
		for _, r := range d.cfg.Policy.RolesOf(who, d.cfg.Domain, callerGroups(ctx, who)...) {
			out = append(out, "role:"+r)
		}
	}
	return out
}
