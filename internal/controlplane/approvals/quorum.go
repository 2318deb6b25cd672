package approvals

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// QuorumFloor is the engine's quorum floor (engine.Config.QuorumFloor):
// the largest quorum the policy sets for any of the actions, 0 for
// actions it names none for (nobody may decide those; authority at
// decision time refuses them) or with no policy. Policy wins (I9): a
// recipe, or a gate request, can ask for more people, never fewer.
// Decisions carry the policy's quorum at decision time too
// (Verdict.Quorum), so a policy raised after the ask opened is met.
func (d *Desk) QuorumFloor(actions []string) int {
	q := 0
	if d.cfg.Policy == nil {
		return q
	}
	for _, act := range actions {
		if f, ok := d.cfg.Policy.Floor(d.cfg.Domain, act); ok {
			q = max(q, f.Quorum)
		}
	}
	return q
}

// RecheckVotes re-authorizes, under the policy in force now, everyone
// whose earlier vote the next approval (by who) would count toward a
// quorum; a vote whose authority lapsed (a role revoked, a delegation
// window closed) is withdrawn through rec first, recorded as withdrawn by
// policy (I9). Call it before committing an approval that counts.
func (d *Desk) RecheckVotes(ctx context.Context, rec runner.Recorder, run *engine.Run, a *engine.AskRun, who string) error {
	for _, v := range a.Votes {
		if v.Actor == who {
			continue
		}
		verdict, err := d.Authorize(judgedWith(ctx, v.Actor, v.Groups), v.Actor, run, a, OptionKind(a, v.Option))
		if err == nil && verdict.OK {
			continue
		}
		why := verdict.Why
		if err != nil {
			why = err.Error()
		}
		voter := v.Actor
		if _, err := rec.Event(ctx, run.ID, func(now time.Time) engine.Event {
			return engine.Revoke{Ask: a.ID, Actor: voter, By: "policy", Reason: "no longer allowed: " + why, At: now}
		}); err != nil && !errors.Is(err, engine.ErrNoVote) {
			return err
		}
	}
	return nil
}
