package authz

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

//go:embed model.conf
var defaultModel string

// DefaultModel returns the model used when Config.ModelPath is empty.
func DefaultModel() []byte { return []byte(defaultModel) }

// DefaultPollInterval is how often Watch looks at the files.
const DefaultPollInterval = 250 * time.Millisecond

// Config configures New.
type Config struct {
	// ModelPath is the casbin model file; "" uses DefaultModel.
	ModelPath string
	// PolicyPath is the CSV policy file. Required.
	PolicyPath string
	// Now is the clock delegation and role windows are judged by, at the
	// moment of each decision. It must be safe for concurrent use. Nil is
	// time.Now.
	Now func() time.Time
	// Log receives reloads and reload failures. Nil discards.
	Log *slog.Logger
	// PollInterval is Watch's period; 0 is DefaultPollInterval.
	PollInterval time.Duration
	// AllowEmpty and MaxDrop are the Guard every load passes: without
	// AllowEmpty a policy with no p rule is refused (New fails; a reload
	// keeps the current policy), and a reload may drop at most MaxDrop
	// of the rules in force (0: DefaultMaxDrop).
	AllowEmpty bool
	MaxDrop    float64
}

// Authorizer answers authority questions from the current policy. It is
// safe for concurrent use. Each answer is evaluated against one loaded
// policy and carries that policy's version.
type Authorizer struct {
	cfg Config
	cur atomic.Pointer[snapshot]

	mu           sync.Mutex // serializes loads; guards the fields below
	checkedModel [32]byte   // digest of the last model that passed selfCheck
	badRaw       [32]byte   // digest of the last file contents that failed to load
	badErr       error
	refused      uint64 // distinct contents refused (Health)
}

// New loads the policy and returns an Authorizer, or an error if the files
// cannot be read or are invalid: there is no default policy.
func New(cfg Config) (*Authorizer, error) {
	if cfg.PolicyPath == "" {
		return nil, errors.New("authz: no policy path")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	a := &Authorizer{cfg: cfg}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Version is the current policy version: hex SHA-256 over the model file's
// bytes and the sorted policy rows. It is what a decision packet binds.
func (a *Authorizer) Version() string { return a.cur.Load().version }

// Reload reads both files and, if their contents changed, builds and
// checks a new policy and publishes it atomically. On any error the
// current policy stays in force and the error says why; decisions never
// wait for a reload. Reloads are serialized.
func (a *Authorizer) Reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	modelText := []byte(defaultModel)
	if a.cfg.ModelPath != "" {
		b, err := os.ReadFile(a.cfg.ModelPath)
		if err != nil {
			return a.failed(fmt.Errorf("authz: read model: %w", err))
		}
		modelText = b
	}
	polText, err := os.ReadFile(a.cfg.PolicyPath)
	if err != nil {
		return a.failed(fmt.Errorf("authz: read policy: %w", err))
	}
	raw := rawDigest(modelText, polText)
	old := a.cur.Load()
	if old != nil && old.raw == raw {
		return nil
	}
	if a.badErr != nil && a.badRaw == raw {
		return a.badErr // same bad contents: already reported
	}
	s, err := a.build(modelText, polText)
	if err == nil {
		var cur [][]string
		if old != nil {
			cur = old.pol.rows
		}
		err = Guard{AllowEmpty: a.cfg.AllowEmpty, MaxDrop: a.cfg.MaxDrop}.Accept(cur, s.pol.rows)
	}
	if err != nil {
		a.refused++
		a.badRaw, a.badErr = raw, a.failed(fmt.Errorf("authz: load %s: %w", a.cfg.PolicyPath, err))
		return a.badErr
	}
	s.raw = raw
	a.badErr = nil
	a.cur.Store(s)
	if old == nil {
		a.cfg.Log.Info("authz policy loaded", "version", s.version, "rows", len(s.pol.rows))
	} else if old.version != s.version {
		a.cfg.Log.Info("authz policy reloaded", "version", s.version, "previous", old.version, "rows", len(s.pol.rows))
	}
	return nil
}

func (a *Authorizer) failed(err error) error {
	if cur := a.cur.Load(); cur != nil {
		a.cfg.Log.Error("authz policy not reloaded; the current policy stays", "version", cur.version, "err", err)
	}
	return err
}

func (a *Authorizer) build(modelText, polText []byte) (*snapshot, error) {
	md := sha256.Sum256(modelText)
	if md != a.checkedModel {
		if err := selfCheck(modelText); err != nil {
			return nil, err
		}
		a.checkedModel = md
	}
	pol, err := parsePolicy(polText)
	if err != nil {
		return nil, err
	}
	return newSnapshot(modelText, pol, a.cfg.Now)
}

func rawDigest(modelText, polText []byte) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", len(modelText))
	h.Write(modelText)
	h.Write(polText)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Watch blocks until ctx is done, then returns nil. Every PollInterval
// (250 ms by default) it reloads if the files' contents changed, so a
// change reaches this replica within a second; each replica runs its own
// Watch on its own copy of the files. A bad file is logged once per
// distinct content and the current policy stays. Watch starts no
// goroutines: run it in one you own and cancel ctx to stop it.
//
// Polling the files' digest rather than fsnotify: the files are small, a
// read four times a second costs nothing, and polling sees every way a file
// can change (in-place writes, renames, the symlink swap of a Kubernetes
// ConfigMap, network file systems) without the per-platform event quirks
// of fsnotify or a goroutine and descriptor to manage.
func (a *Authorizer) Watch(ctx context.Context) error {
	t := time.NewTicker(a.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_ = a.Reload() // logged by Reload; the current policy stays
		}
	}
}

// Floor is the bar policy sets for one action type in one domain.
type Floor struct {
	Domain, Action string
	// Rules are the roles that may decide the action, each with its limit.
	Rules []RoleRule
	// Quorum is the number of distinct people who must approve (≥ 1).
	Quorum int
	// SeparateFrom lists the parties who may not decide, directly or
	// through a delegate: SepRequester, SepAgentOwner.
	SeparateFrom []string
	// Currency is the ISO 4217 code amounts are in; "" when the action
	// carries no amount.
	Currency string
}

// RoleRule is one role's permission for an action type.
type RoleRule struct {
	Role string // bare role name, e.g. "finance"
	// Limit is the largest amount in minor units the role may approve; nil
	// when unlimited or when the action carries no amount.
	Limit *int64
}

// Floor returns the policy's floor for an action type — its own, or that
// of the longest pattern row covering it (Floor.Action says which) — and
// false when the policy says nothing about it (then nobody may decide it).
func (a *Authorizer) Floor(domain, action string) (Floor, bool) {
	return a.cur.Load().floor(domain, action)
}

func (s *snapshot) floor(domain, action string) (Floor, bool) {
	f, ok := s.pol.lookup(domain, action)
	if !ok {
		return Floor{}, false
	}
	action = f.action
	out := Floor{Domain: domain, Action: action, Quorum: f.quorum, SeparateFrom: slices.Clone(f.separate), Currency: f.currency}
	for _, r := range s.pol.rules {
		if r.domain != domain || r.action != action {
			continue
		}
		rr := RoleRule{Role: strings.TrimPrefix(r.role, RolePrefix)}
		if r.kind == limitKindAmount {
			rr.Limit = &r.limit
		}
		out.Rules = append(out.Rules, rr)
	}
	slices.SortFunc(out.Rules, func(x, y RoleRule) int { return strings.Compare(x.Role, y.Role) })
	return out, true
}

// IsRole reports whether name (bare, or with RolePrefix) is a role the
// policy defines in domain: what `ask NAME` or an approvers entry means
// by a role rather than a person.
func (a *Authorizer) IsRole(name, domain string) bool {
	return a.cur.Load().pol.roles[domain][RolePrefix+strings.TrimPrefix(name, RolePrefix)]
}
