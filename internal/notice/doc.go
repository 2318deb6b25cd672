// Package notice is what every notifier of asks shares (internal/slackapp,
// internal/emailnotify): where an ask's decision packet comes from, the
// links a notice carries, how a delivery's attempts are made, retried,
// recorded and logged, and how an action's args and an ask's ending are
// read for a person. How a notice looks, and what a channel's replies
// mean, stay with each notifier.
//
// What it enforces:
//
//   - An ask that does not exist is final at once. A packet source's
//     ErrNoAsk (or a gRPC NotFound status), or no ask at all, makes the
//     attempt Rejected ("ask not found"), never retried; any other
//     failure to read it is Retrying, and the end of the caller's context
//     is Abandoned.
//   - A delivery is final or abandoned, and every final one is recorded.
//     Attempts.Deliver makes attempts until one is not Retrying or
//     Attempts.Max is reached (Failed), waits between them with backoff
//     (BaseBackoff doubling to MaxBackoff, equal jitter; a wait the
//     channel asks for, such as Slack's Retry-After, is honoured up to
//     MaxBackoff), records and logs every attempt as it happens, and
//     returns Abandoned, not Final and not recorded, when ctx ends first.
//     Raw bytes that are not an event it can deliver are Rejected, an
//     endpoint not configured now is Dropped: both final and recorded.
//   - A single-use link never outlives its ask: PersonLink asks for one
//     valid until the ask's deadline (a day, for an ask without one).
//   - Reading untrusted args never fails: Args and Amount take any text;
//     what is not a JSON object with fields shows nothing. Their results
//     are not escaped — every notifier escapes them for its medium — and
//     Words.Ending escapes every text from others with the notifier's
//     own Esc.
//
// What survives a restart: nothing; the package keeps no state.
package notice
