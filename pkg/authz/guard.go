package authz

import (
	"fmt"
	"strings"
)

// DefaultMaxDrop is the share of the rules in force a reload may drop
// when Config.MaxDrop is zero.
const DefaultMaxDrop = 0.5

// Errors of a policy the Guard refuses; both wrap ErrPolicy.
var (
	// ErrEmptyPolicy: no p rule, so nobody may decide anything — what an
	// emptied or truncated file looks like.
	ErrEmptyPolicy = fmt.Errorf("%w: the policy has no p rule, so it lets nobody decide anything (an empty or truncated file?); allow it explicitly if that is meant", ErrPolicy)
	// ErrPolicyShrank: a reload would drop more of the rules in force
	// than the Guard lets it.
	ErrPolicyShrank = fmt.Errorf("%w: the new policy drops too many of the rules in force", ErrPolicy)
)

// Guard decides whether a parsed, valid policy may replace the one in
// force. It is the one place that judges a rule set against its
// predecessor, and a pure function of the two: an operator's half-written
// or truncated file must not become the policy just because each of its
// rows parses.
type Guard struct {
	// AllowEmpty accepts a policy with no p rule (at startup and on
	// reload), which denies every decision.
	AllowEmpty bool
	// MaxDrop is the largest share (0 < MaxDrop ≤ 1) of the rules in
	// force that one reload may drop; 0 is DefaultMaxDrop, 1 turns the
	// check off. A bigger rewrite takes a restart (there is then nothing
	// to compare with) or a higher MaxDrop.
	MaxDrop float64
}

// Accept returns nil if next may replace cur, else an error wrapping
// ErrEmptyPolicy or ErrPolicyShrank that says why. cur is nil at startup.
// Rules are policy rows ([ptype, fields…]); a row counts as dropped when
// next has no identical row.
func (g Guard) Accept(cur, next [][]string) error {
	if !g.AllowEmpty && !hasPermission(next) {
		return ErrEmptyPolicy
	}
	if len(cur) == 0 || len(next) == 0 {
		return nil // startup, or an empty policy that was allowed above
	}
	maxDrop := g.MaxDrop
	if maxDrop <= 0 {
		maxDrop = DefaultMaxDrop
	}
	kept := make(map[string]bool, len(next))
	for _, r := range next {
		kept[strings.Join(r, "\x00")] = true
	}
	dropped := 0
	for _, r := range cur {
		if !kept[strings.Join(r, "\x00")] {
			dropped++
		}
	}
	if share := float64(dropped) / float64(len(cur)); share > maxDrop {
		return fmt.Errorf("%w: %d of %d rules (%.0f%%), more than the %.0f%% one reload may drop; fix the file, or raise the share (--policy-max-drop) or restart to load it",
			ErrPolicyShrank, dropped, len(cur), share*100, maxDrop*100)
	}
	return nil
}

func hasPermission(rows [][]string) bool {
	for _, r := range rows {
		if len(r) > 0 && r[0] == "p" {
			return true
		}
	}
	return false
}

// Health is what the loads of an Authorizer did, for metrics and probes.
type Health struct {
	// Refused counts the distinct file contents a load refused (each is
	// logged once), since New.
	Refused uint64
	// Stale is true while the files on disk are refused and the last
	// good policy stays in force.
	Stale bool
}

// Health reports the reloads' state.
func (a *Authorizer) Health() Health {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Health{Refused: a.refused, Stale: a.badErr != nil}
}
