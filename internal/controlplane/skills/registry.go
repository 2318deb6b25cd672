package skills

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/decidable"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Origins of a version (store.SkillVersion.Origin).
const (
	OriginAPI = "api"
	OriginDir = "dir"
)

// CodeUndecidable is the diagnostic code of a gate nobody could decide.
const CodeUndecidable = "undecidable_gate"

// namePattern is what a skill (and a schedule) may be called: it is a
// policy action's tool part (`skill.NAME`), a path segment and a Redis
// hash field, so no dots, slashes, colons or spaces.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// CheckName refuses a name a skill or schedule may not have.
func CheckName(what, name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%s name %q: use 1-64 of a-z, 0-9, '-' and '_', starting with a letter or digit: %w", what, limits.Short(name), errkind.Invalid)
	}
	return nil
}

// Authority is what the registry asks policy (approvals.Desk).
type Authority interface {
	MayPublishSkill(ctx context.Context, who, name string) (string, bool)
	UndecidableGates(ctx context.Context, requester string, p *plan.Plan) ([]decidable.GateAuthority, error)
}

// Config is what a Registry needs.
type Config struct {
	Store     store.Skills
	Catalog   func() *compiler.Catalog
	Authority Authority
	// Now is the time a version is stamped with (the store's clock).
	Now func(context.Context) (time.Time, error)
	Log *slog.Logger
}

// Registry publishes and finds skills.
type Registry struct{ cfg Config }

// New returns a Registry.
func New(cfg Config) *Registry {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Registry{cfg: cfg}
}

// PutRequest is one publication.
type PutRequest struct {
	Who  string // the author, authenticated
	Name string // "" takes the front matter's
	// DefaultName names a source without front matter `name` when Name
	// is empty (a directory's folder name).
	DefaultName string
	Source      string
	// Expect: 0 any; -1 the skill must not exist (never published, or
	// deleted); N the latest version must be N.
	Expect int64
	Origin string // OriginAPI (judged by policy) or OriginDir (not)
}

// PutResult is what became of a publication. A source that does not
// compile, or has a gate nobody could decide, is not saved: Diagnostics
// say why, at line:col, and the error is nil.
type PutResult struct {
	Saved, Unchanged bool
	Version          store.SkillVersion
	Compiled         compiler.Result
	Diagnostics      compiler.Diagnostics
}

// maxPutTries bounds retries of a publication that lost a race with
// another writer of the same name (another replica loading the same
// directory): each retry reads the new latest first.
const maxPutTries = 4

// Put compiles and stores req as the skill's next version.
func (r *Registry) Put(ctx context.Context, req PutRequest) (PutResult, error) {
	if req.Source == "" {
		return PutResult{}, fmt.Errorf("publish: the source is empty: %w", errkind.Invalid)
	}
	if len(req.Source) > compiler.MaxSourceBytes {
		return PutResult{}, fmt.Errorf("publish: the source is %d bytes, the limit is %d: %w", len(req.Source), compiler.MaxSourceBytes, errkind.Invalid)
	}
	res := compiler.Compile(req.Source, compiler.Options{Catalog: r.cfg.Catalog(), Name: cmp.Or(req.Name, req.DefaultName)})
	out := PutResult{Compiled: res, Diagnostics: res.Diagnostics}
	if res.Plan == nil {
		return out, nil
	}
	name := res.Plan.Name
	if req.Name != "" && name != req.Name {
		return PutResult{}, fmt.Errorf("publish: the request names the skill %q but its front matter says %q: %w", limits.Short(req.Name), limits.Short(name), errkind.Invalid)
	}
	if name == "" {
		return PutResult{}, fmt.Errorf("publish: name the skill (front matter `name:` or the request's name): %w", errkind.Invalid)
	}
	if err := CheckName("skill", name); err != nil {
		return PutResult{}, err
	}
	if req.Origin != OriginDir {
		if why, ok := r.cfg.Authority.MayPublishSkill(ctx, req.Who, name); !ok {
			return PutResult{}, fmt.Errorf("%s may not publish the skill %s: %s: %w", req.Who, name, why, errkind.Denied)
		}
	}
	// Judged as if its author started it: the author is who the run's
	// separation of duties would exclude first, and a gate nobody but
	// its author could decide is one nobody else could. A directory has
	// no author who runs it: a gate that asks whoever starts the run is
	// judged when someone does (CheckStart), the others now.
	bad, err := r.cfg.Authority.UndecidableGates(ctx, req.Who, res.Plan)
	if err != nil {
		return PutResult{}, err
	}
	if req.Origin == OriginDir {
		bad = slices.DeleteFunc(bad, func(g decidable.GateAuthority) bool { return asksRequester(res.Plan, g.Gate) })
	}
	if len(bad) > 0 {
		for _, g := range bad {
			pos := res.Positions[g.Gate]
			if pos.Line == 0 {
				pos = compiler.Pos{Line: 1, Col: 1}
			}
			out.Diagnostics = append(out.Diagnostics, compiler.Diagnostic{Pos: pos, Severity: compiler.Error, Code: CodeUndecidable,
				Message: fmt.Sprintf("nobody could decide %q (%s) under the policy in force: %s", g.Title, g.Gate, g.Problem.Text())})
		}
		return out, nil
	}
	for try := 1; ; try++ {
		latest, err := r.cfg.Store.SkillVersion(ctx, name, 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return PutResult{}, err
		}
		live := latest.Version > 0 && !latest.Deleted
		switch {
		case req.Expect == -1 && live:
			return PutResult{}, fmt.Errorf("the skill %s exists (version %d): %w", name, latest.Version, errkind.Precondition)
		case req.Expect > 0 && latest.Version != req.Expect:
			return PutResult{}, fmt.Errorf("the skill %s is at version %d, not %d: %w", name, latest.Version, req.Expect, errkind.Precondition)
		}
		if live && latest.Source == req.Source {
			out.Saved, out.Unchanged, out.Version = true, true, latest
			return out, nil
		}
		at, err := r.cfg.Now(ctx)
		if err != nil {
			return PutResult{}, err
		}
		v, err := r.cfg.Store.AddSkillVersion(ctx, store.SkillVersion{Name: name, Description: res.Plan.Description, Source: req.Source,
			PlanDigest: res.Digest, Author: req.Who, At: at, Origin: req.Origin}, latest.Version)
		if errors.Is(err, store.ErrConflict) && try < maxPutTries && req.Expect <= 0 {
			continue
		}
		if errors.Is(err, store.ErrConflict) {
			return PutResult{}, fmt.Errorf("the skill %s changed while it was being published; read it again: %w", name, errkind.Precondition)
		}
		if err != nil {
			return PutResult{}, err
		}
		r.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "skill published", slog.String("skill", name), slog.Int64("version", v.Version),
			slog.String("author", req.Who), slog.String("origin", req.Origin), slog.String("plan", res.Digest))
		out.Saved, out.Version = true, v
		return out, nil
	}
}

// asksRequester reports whether the plan's gate id asks whoever starts
// the run (`ask me`).
func asksRequester(p *plan.Plan, id string) bool {
	for _, sp := range p.AllStops() {
		if sp.ID == id {
			return sp.Audience == "" || sp.Audience == plan.AudienceRequester
		}
	}
	return false
}

// Get returns a version of a skill, or its latest (version 0), which must
// not be a deletion: a deleted skill is not found unless a version is
// named.
func (r *Registry) Get(ctx context.Context, name string, version int64) (store.SkillVersion, error) {
	if err := CheckName("skill", name); err != nil {
		return store.SkillVersion{}, err
	}
	v, err := r.cfg.Store.SkillVersion(ctx, name, version)
	if errors.Is(err, store.ErrNotFound) {
		if version > 0 {
			return store.SkillVersion{}, fmt.Errorf("the skill %s has no version %d: %w", name, version, errkind.NotFound)
		}
		return store.SkillVersion{}, fmt.Errorf("no skill named %s: %w", name, errkind.NotFound)
	}
	if err != nil {
		return store.SkillVersion{}, err
	}
	if v.Deleted {
		if version > 0 {
			return store.SkillVersion{}, fmt.Errorf("version %d of %s is its deletion by %s: %w", version, name, v.Author, errkind.NotFound)
		}
		return store.SkillVersion{}, fmt.Errorf("the skill %s was deleted by %s (its history is kept: approvectl skills history %s): %w", name, v.Author, name, errkind.NotFound)
	}
	return v, nil
}

// Runnable is the version a run of the skill runs: the latest, or the
// one named, of a skill that exists: a deleted skill runs no version
// (its schedules' ticks fail until it is published again).
func (r *Registry) Runnable(ctx context.Context, name string, version int64) (store.SkillVersion, error) {
	if version == 0 {
		return r.Get(ctx, name, 0)
	}
	latest, err := r.Get(ctx, name, 0)
	if err != nil {
		return store.SkillVersion{}, err
	}
	if version > latest.Version {
		return store.SkillVersion{}, fmt.Errorf("the skill %s has no version %d (its latest is %d): %w", name, version, latest.Version, errkind.NotFound)
	}
	return r.Get(ctx, name, version)
}

// Delete removes a skill: a tombstone version by who. expect 0 deletes
// whatever the latest is.
func (r *Registry) Delete(ctx context.Context, who, name string, expect int64, origin string) (store.SkillVersion, error) {
	latest, err := r.Get(ctx, name, 0)
	if err != nil {
		return store.SkillVersion{}, err
	}
	if origin != OriginDir {
		if why, ok := r.cfg.Authority.MayPublishSkill(ctx, who, name); !ok {
			return store.SkillVersion{}, fmt.Errorf("%s may not delete the skill %s: %s: %w", who, name, why, errkind.Denied)
		}
	}
	if expect > 0 && latest.Version != expect {
		return store.SkillVersion{}, fmt.Errorf("the skill %s is at version %d, not %d: %w", name, latest.Version, expect, errkind.Precondition)
	}
	at, err := r.cfg.Now(ctx)
	if err != nil {
		return store.SkillVersion{}, err
	}
	v, err := r.cfg.Store.AddSkillVersion(ctx, store.SkillVersion{Name: name, Author: who, At: at, Deleted: true, Origin: origin}, latest.Version)
	if errors.Is(err, store.ErrConflict) {
		return store.SkillVersion{}, fmt.Errorf("the skill %s changed while it was being deleted; read it again: %w", name, errkind.Precondition)
	}
	if err != nil {
		return store.SkillVersion{}, err
	}
	r.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "skill deleted", slog.String("skill", name), slog.Int64("version", v.Version), slog.String("by", who))
	return v, nil
}

// List pages through the skills that exist.
func (r *Registry) List(ctx context.Context, token string, limit int) ([]store.SkillVersion, string, error) {
	return r.cfg.Store.ListSkills(ctx, token, limit)
}

// History pages through every version of a skill; NotFound if the name
// was never used.
func (r *Registry) History(ctx context.Context, name string, after int64, limit int) ([]store.SkillVersion, error) {
	if err := CheckName("skill", name); err != nil {
		return nil, err
	}
	vs, err := r.cfg.Store.SkillHistory(ctx, name, after, limit)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 && after == 0 {
		return nil, fmt.Errorf("no skill was ever named %s: %w", name, errkind.NotFound)
	}
	return vs, nil
}

// Latest is a skill's latest version, a deletion included.
func (r *Registry) Latest(ctx context.Context, name string) (store.SkillVersion, error) {
	v, err := r.cfg.Store.SkillVersion(ctx, name, 0)
	if errors.Is(err, store.ErrNotFound) {
		return v, fmt.Errorf("no skill named %s: %w", name, errkind.NotFound)
	}
	return v, err
}
