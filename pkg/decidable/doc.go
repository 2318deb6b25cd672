// Package decidable says, before anyone is asked, who could decide an
// approval — a plan's gates when a run would start, an ask as it opens, a
// gate a script opens — or why nobody could, with the policy rows to add
// or the fix to the recipe (issue 16). It is pure: it reads the policy it
// is handed (Policy, in memory: pkg/authz's Authorizer) and its inputs,
// and does no I/O. The control plane's approvals desk
// (internal/controlplane/approvals) refuses with its answers;
// `approvectl plan --policy` shows them offline, judged the same way.
//
// It also reads a governed action as policy does (Matter): its type, the
// requester and agent owner separation of duties keeps out, and its
// amount in minor units, exactly (ParseMinorUnits: never rounded).
//
// Invariants it enforces, and where:
//   - I5 there is always a way out: an ask nobody could decide is found
//     before it is parked. Who "could decide" is policy's answer
//     (authz.Deciders) for every action an ask governs together, within
//     whom it asks, or — when too few of them may — in the role it would
//     escalate to (Judge, decidable.go); never "anyone" by default. A
//     plan's gate governs the side effects below it and no nearer gate, as
//     the engine indexes them (planGates); an amount known only once
//     earlier steps run is judged at the least it could be (0 in its
//     floor's currency), so a gate nobody could decide at any amount is
//     found at start (PlanAuthority, startMatter).
//   - I9 separation of duties: a matter keeps out its requester and the
//     agent's owner (Matter, matter.go); a gate from code is someone
//     else's check on a script, so its requester, and anyone acting for
//     them, never counts toward deciding it, whatever policy's separation
//     says (Judge's self). An amount is an exact int64 in minor units or
//     an error, never rounded (ParseMinorUnits, amount.go).
package decidable
