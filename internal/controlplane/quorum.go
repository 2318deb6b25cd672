package controlplane

// policyQuorum is the engine's quorum floor (engine.Config.QuorumFloor)
// under az in domain: the largest quorum the policy sets for any of the
// actions, 0 for actions it names none for (nobody may decide those;
// authority at decision time refuses them). Policy wins (I9): a recipe,
// or a gate request, can ask for more people, never fewer. Decisions
// carry the policy's quorum at decision time too (authority.quorum), so
// a policy raised after the ask opened is met.
func policyQuorum(az Authority, domain string) func(actions []string) int {
	return func(actions []string) int {
		q := 0
		for _, act := range actions {
			if f, ok := az.Floor(domain, act); ok {
				q = max(q, f.Quorum)
			}
		}
		return q
	}
}
