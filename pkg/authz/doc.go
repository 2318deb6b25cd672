// Package authz decides who may approve what (DESIGN.md §5, I9): roles per
// domain, action types ("server.tool"), amount limits compared exactly as
// int64 minor units, delegation with validity windows, quorum and
// separation of duties from the requester and the agent owner — also
// through a delegate. It wraps a casbin v2 SyncedEnforcer.
//
// Policy is two files: a casbin model (the embedded default, model.conf,
// unless Config.ModelPath names another) and a CSV policy:
//
//	# p: role, domain, action, limit (minor units | unlimited | - for no amount)
//	p, role:finance, acme, payments.pay, 500000
//	# p2: domain, action, quorum, separate from (none | requester | agent_owner | requester+agent_owner), currency (- for no amount)
//	p2, acme, payments.pay, 1, requester+agent_owner, INR
//	# g: member, role or delegator, domain, from, until (RFC 3339; _ is open)
//	g, alice, role:finance, acme, _, _
//	g, dave, alice, acme, 2026-09-01T00:00:00Z, 2026-09-15T00:00:00Z
//
// An action in a p or p2 row may be a pattern, server.prefix* (gate.* for
// every gate; the '*' never matches a dot): an action without rows of its
// own falls under the longest pattern covering it, whose roles decide it,
// while every broader pattern's separation of duties and quorum still
// hold, at every level below it (gate.*'s reach gate.deploy.prod under a
// gate.deploy.* row). casbin compares the row as written (no keyMatch).
//
// Every error denies: a decision that could not be evaluated is
// Allowed=false together with the error. Decisions read memory only; files
// are read by New, Reload and Watch. The package does no network I/O.
//
// Invariants it enforces, and where:
//   - I9 only who may, decides: Authorize (decide.go) judges one actor on
//     one matter by the policy in force now; only casbin's allow allows.
//     The matcher (model.conf, with withinLimit, window and separate in
//     snapshot.go) holds amount limits, delegation windows and separation
//     of duties from the requester and the agent owner, delegates
//     included; the quorum is the larger of policy's and the recipe's.
//     A reload that empties or guts the policy is refused (Guard, guard.go).
//     A narrower row never drops a broader pattern's bars (inherit,
//     policy.go). Deciders (decidable.go) says, before anyone is asked,
//     whether anyone could decide an ask's matters, and if not why and
//     the rows to add.
package authz
