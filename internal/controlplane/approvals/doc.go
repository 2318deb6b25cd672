// Package approvals is the approvals desk: decision-time authority,
// routing and escalation, the policy's quorum floor and re-checks of
// earlier votes, delegation, standing approvals, and the notices people
// get about asks. It knows nothing of gRPC: the API maps requests to
// decision kinds (Kind) and calls a Desk; the Runner calls it as its
// AskHook after each commit that opens, notices or closes an ask.
//
// Policy (pkg/authz) is consulted through one interface, Policy, that
// decides and routes; *authz.Authorizer satisfies it (desk.go), so an ask
// nobody may decide is always routed and escalated, never missed for
// want of a method.
//
// Invariants it enforces, and where:
//   - I9 only who may, decides: every decision kind against every ask
//     type is one table (needFor, kinds.go) and one function, Authorize
//     (authority.go), asked at decision time — never when the ask was
//     routed; separation of duties (requester and agent owner, also
//     through delegation) is in the matter policy judges (matter,
//     authority.go) and holds for delegates (delegation.go) and standing
//     approvals, judged as their granter now (standing.go). The policy's
//     quorum is the floor: QuorumFloor for the engine, Verdict.Quorum on
//     each decision, and RecheckVotes withdraws earlier votes whose
//     authority lapsed (quorum.go). A `without asking` step is the
//     starter's approval only where policy lets one person approve it
//     (unasked.go, for I1). A gate is decided under the action policy
//     fixes for it; a requester's added action raises the bar (RouteGate,
//     routing.go; matters, authority.go).
//   - I6 one decision about one exact thing: Kind.Approves names the
//     decisions that must bind the payload and evidence the decider was
//     shown (the API pins them with engine.JudgedOn); a standing approval
//     is pinned to the payload its scope matched (applyStanding,
//     standing.go).
//   - I5 every non-answer path terminates: an ask policy leaves nobody
//     eligible for escalates when it opens, to the recipe's role or the
//     configured one, and is never approved by default (unroutable,
//     routing.go; Opened, notices.go).
package approvals
