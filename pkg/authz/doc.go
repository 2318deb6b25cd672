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
//   - Routing is an index over that one authority, and costs what the
//     holders of the deciding roles cost, not what the domain's people
//     do (index.go). When a policy loads, its rows are read backwards
//     (role → holders, person → delegates, every window, any depth: a
//     superset of whom casbin can ever allow); Route, RouteAsked and
//     Deciders weigh only the holders of the roles whose rules may
//     decide the matter within its amount, each judged by the default
//     matcher evaluated by hand with casbin's own role manager as g, its
//     rows in casbin's order (matches). They agree with casbin's enforce
//     by construction and by test: TestRouteIndexProperty and
//     FuzzRouteIndex compare them, on random policies, with the old
//     evaluation of every person by casbin (routing.everyone), which a
//     model whose matcher or effect is not the default one still gets.
//     Routing informs (who is asked, whether an ask escalates); only
//     Authorize decides.
//   - AuthorizeCached (answers.go) is Authorize's answer, Reason and
//     all, kept per loaded policy — a reload starts with none — under a
//     key of everything it depends on: person and groups, domain and
//     row, amount band between the rules' limits, epoch between window
//     sides (a delegation that ends is seen the instant it ends), the
//     requester and agent owner when the person is, or could act for,
//     one of them, and the recipe's ask. TestAnswersMatchAuthorize and
//     FuzzAnswers compare it with Authorize. It serves views that ask
//     about many asks at once (the inbox); a decision is judged afresh.
package authz
