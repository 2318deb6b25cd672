// Package answer interprets a free-text reply to a parked ask, once, for
// every text surface (CLI, chat, API): DESIGN.md §5, "Answers from text
// surfaces", and invariant I5 (every non-answer path terminates).
//
// The package is pure: it does no I/O and keeps no state. The caller stores
// the consecutive-miss counter with the parked ask, passes it to [Match] and
// stores [Reply.Misses] back.
//
// # Rules
//
// The reply is normalised before anything else: surrounding white space is
// trimmed, one leading "/" is stripped (and white space after it trimmed),
// runs of inner white space count as one space, and case is folded. Option
// labels are normalised the same way, so "/menu", "menu" and " MENU " are the
// same word on every surface.
//
//   - An option is selected by its number exactly as [Menu] prints it ("2";
//     not "02", "+2" or "2.") or by its exact label ("yes" for "Yes"). A
//     number in range wins over a label that reads as a number. A label that
//     matches more than one option selects nothing (reply with the number).
//   - An option always beats a control word: a menu whose label is literally
//     "Stop" selects that option on "stop" or "/stop".
//   - "menu" and "options" re-show the ask ([Reshown]); the ask stays parked.
//   - "cancel", "exit", "quit", "stop" and "nevermind" drop the run
//     ([Dropped]).
//   - Anything else is a miss. A miss is never a partial selection: "2 no add
//     it to #alpha-testing" selects nothing (the B16 incident).
//   - In a free-text ask only the slash forms ("/cancel", "/menu", ...) are
//     control words; any other non-empty reply is the answer, as typed
//     (trimmed), so a bare "cancel" there is data. If a free-text ask also
//     lists options, a number or a label still selects one of them. An empty
//     reply (or a lone "/") is a miss.
//
// # Misses
//
// Each miss adds one to the counter; from the [MissesBeforeEscapeHint]-th
// consecutive miss on, the reply is [EscapeHint] instead of [NoMatch] and its
// message names the exits that work on this ask (an exit word shadowed by an
// option label is not offered; the next free one is). A selection resets the
// counter to 0; so does a drop (the ask is closed). A re-show neither counts
// as a miss nor resets the counter.
//
// # Messages and the caller's contract
//
// Every [Reply] carries a non-empty Message, written here and nowhere else.
// Callers switch on [Reply.Kind], never on message text. In particular:
//
//   - A reply that is not an answer ([NoMatch], [EscapeHint], [Reshown]) is
//     fully handled by printing Message. The caller must not forward the text
//     anywhere else (to a model, to another handler): a reply to a parked ask
//     never leaves this package as "not mine".
//   - On [Selected] the caller records the decision (Option, or Text for a
//     free-text answer) and resumes the run.
//   - On [Dropped] the caller cancels the run and closes its asks in the same
//     write (I3), prints Message, and appends, from the run record, what did
//     and did not run before this ask. Message itself states only what this
//     package knows: no answer was given, so nothing waiting on it ran.
//
// Invariants it enforces, and where (answer.go):
//   - I5 every non-answer path terminates: Match gives every reply a typed
//     Reply with a non-empty Message, the same on every surface; repeated
//     misses change it to EscapeHint, which names the exits that work on
//     this ask; a drop word ends the run (Dropped).
package answer
