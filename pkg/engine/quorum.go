package engine

import "github.com/tollgate-dev/tollgate/pkg/plan"

// actions is every action policy judges an approval of a by: each
// governed payload's, and each action a gate's requester added (Also).
func (a *AskRun) actions() []string {
	var out []string
	for _, p := range a.Payload {
		out = append(out, p.Server+"."+p.Tool)
	}
	return append(out, a.Also...)
}

// countsQuorum reports whether approvals of a are counted toward a
// quorum: an approval gate of a recipe or a script, or an in-doubt
// side effect (a retry is an approval).
func (a *AskRun) countsQuorum() bool {
	return (a.Type == plan.StopMenu || a.Type == Gate || a.Type == InDoubt) && len(a.Payload) > 0
}

// floorQuorum raises a just-opened ask's quorum to the policy's floor
// for its actions (Config.QuorumFloor): the recipe or the script may ask
// for more people, never fewer.
func (t *tx) floorQuorum(a *AskRun) {
	if t.m.cfg.QuorumFloor == nil || !a.countsQuorum() {
		return
	}
	a.Quorum = max(a.Quorum, t.m.cfg.QuorumFloor(a.actions()))
}

// raiseQuorum raises a pending ask's quorum to q, the policy's at
// decision time, before the decision is counted: the approval that would
// have completed a lower, older quorum is then one vote of the new one.
// A quorum is never lowered.
func (t *tx) raiseQuorum(a *AskRun, q int, actor string) {
	if !a.countsQuorum() || q <= max(a.Quorum, 1) {
		return
	}
	t.record(JournalAskQuorumRaised, actor, map[string]any{"ask": a.ID, "from": max(a.Quorum, 1), "to": q, "by": "policy"})
	a.Quorum = q
}
