// Package standing parses and matches the scope of a standing approval
// (DESIGN.md §5: "approve a standing exception until a date — scoped,
// listed, revocable"). A scope names one action type and bounds the
// payload: exact values for some fields, inclusive integer ceilings for
// others. It is pure: no clock, no I/O.
//
// Grammar (tokens separated by spaces):
//
//	SCOPE  = ACTION { BOUND } [ "@" REQUESTER ]
//	ACTION = server "." tool
//	BOUND  = field "=" value        the arg equals value (a string arg's text, or a number's digits)
//	       | field "<=" integer     the arg is an integer (minor units) no greater than it
//
// e.g. "payments.pay vendor=V-1187 amount<=500000". @REQUESTER narrows it
// to the asks of runs one principal started: "slack.slack_post_message
// channel=#daily @alice-agent" is "this agent may post to #daily"
// (Covers).
//
// Invariants it enforces, and where (standing.go):
//   - I6 one decision about one exact thing, for standing approvals: a
//     scope covers one action and only payloads within its bounds; Match
//     refuses another action, a bounded field the args lack or hold in
//     another type, and an integer over its ceiling, and says why. Who may
//     grant one, and its expiry and revocation, are the approvals desk's.
package standing
