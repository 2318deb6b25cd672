// Package approvals is the approvals desk: decision-time authority,
// routing and escalation, the policy's quorum floor and re-checks of
// earlier votes, delegation, standing approvals, and the notices people
// get about asks. It knows nothing of gRPC: the API maps requests to
// decision kinds (Kind) and calls a Desk; the Runner calls it as its
// AskHook after each commit that opens, notices or closes an ask, and as
// its Outbox while building each commit: notices are work entries written
// in the commit that causes them, sent by a Deliverer on any replica
// (outbox.go, deliverer.go), so a replica that dies loses none. Policy
// (pkg/authz) is one interface, Policy, that decides and routes (desk.go),
// so an ask nobody may decide is always routed and escalated.
//
// Invariants it enforces, and where:
//   - I9 only who may, decides: one table of decision kinds by ask type
//     (needFor, kinds.go) and one function, Authorize (authority.go), asked
//     at decision time, never when the ask was routed. Separation of duties
//     from requester and agent owner is in the matter policy judges
//     (matter, authority.go: built by decidable.Matter, amounts read
//     exactly by decidable.ParseMinorUnits) and holds for delegates
//     (delegation.go) and standing approvals, judged as their granter now
//     (standing.go). The
//     policy's quorum is the floor (QuorumFloor, Verdict.Quorum), and
//     RecheckVotes withdraws votes whose authority lapsed (quorum.go). A
//     gate is decided under the action policy fixes for it; a requester's
//     added action raises the bar (RouteGate, routing.go). What the inbox
//     and visibility ask of many asks at once (MayDecide) policy may
//     answer from the answers it keeps per version (authz.AuthorizeCached:
//     the same answer at that moment, a reload or a window's end seen at
//     once); a decision, a re-checked vote, a standing approval's granter
//     and a start without asking are judged afresh (Authorize).
//   - I9 for agents: who may call a tool through the MCP gateway is
//     policy's action call.SERVER.TOOL (MayCall, calls.go); a call only
//     asks, and its gate is decided like any other. One test of "holds a
//     role policy gives an action" serves skills, standing approvals and
//     calls (holdsRoleFor).
//   - I1: a `without asking` step is the starter's approval only where
//     policy lets one person approve it (MayStartUnasked, unasked.go).
//   - I6: Kind.Approves names the decisions that must bind the payload and
//     evidence shown (the API pins them with engine.JudgedOn); a standing
//     approval is pinned to the payload its scope matched (applyStanding).
//   - I5: an ask policy leaves nobody eligible for escalates when it opens,
//     to the recipe's role or the configured one, and is never approved by
//     default (unroutable, routing.go; Opened, notices.go); routing an
//     ask as it opens costs what those it asks cost (authz.RouteAsked),
//     not what the domain's people do. An ask nobody
//     could decide, escalation included, is never parked (decidable.go):
//     refused at start (CheckStart, with the reasons and the policy rows
//     to add), failing its run as it would open when its amount is known
//     only then (Undecidable, the engine's hook), refused when a script
//     opens it — also when only its requester could decide it (RouteGate).
//     Who could decide is pkg/decidable's answer (Checker: PlanAuthority,
//     Judge), the same `approvectl plan --policy` shows offline; the desk
//     refuses with it (errkind.Precondition).
package approvals
