// Package slackapp is the Slack surface (DESIGN.md §9b): a notifier that
// posts an ask to a channel or to its approvers as a Block Kit message,
// and an interactivity endpoint whose Approve and Reject buttons decide
// through the approval service's Decide, like every other surface.
//
// What it enforces:
//
//   - Only Slack decides through it. Every interaction is refused (401,
//     nothing changed, nothing decided) unless it carries Slack's v0
//     signature (HMAC-SHA256 of "v0:timestamp:body" under the signing
//     secret, checked with slack-go's SecretsVerifier), a timestamp
//     within five minutes, and a signature not accepted before: a
//     bounded replay cache holds each accepted signature until its
//     timestamp leaves the window, and when full of live ones it takes
//     no more (503) rather than forget one.
//   - A decision is a person's. The Slack user maps to a Tollgate person
//     only through the configured map or, when enabled, a confirmed
//     email of a live, human member of the configured workspace; anyone
//     else is told so ephemerally and nothing is decided. The decision
//     is made as that person (issuer "slack", surface "slack") through
//     Decide, which checks authority at that moment and journals actor,
//     time, reason and surface exactly as for approvectl. A Slack-mapped
//     person carries no identity-provider groups: only the roles policy
//     gives them by name count.
//   - A click decides exactly what its message showed or nothing: the
//     buttons carry the ask id, the payload and evidence digests and the
//     option bound when the message was drawn, and Decide refuses them
//     as stale if the ask changed since (the person is told to open it).
//   - Opening never decides: Open is a link (the ask's page, or, in a
//     direct message, a single-use link for that person); its click is
//     acknowledged and ignored. Approve asks for confirmation.
//   - Reject has no free-text reason in Slack: it records "rejected in
//     Slack by <person>" after a confirmation that says so; a person who
//     wants to give a reason uses Open.
//   - Nothing from a run is Slack markup: every text from the packet is
//     escaped (&, <, >), so it cannot mention, link or inject.
//   - The bot token goes only to the API URL: redirects are never
//     followed, and a response_url is used only when it is
//     https://hooks.slack.com or on the API URL's host.
//
// Timing: Slack wants an answer within 3 seconds, and Decide may re-check
// freshness on an executor when quorum is reached, so a verified click
// is acknowledged at once and decided by one of Run's workers (bounded
// queue: 503 when full); the answer goes through the click's
// response_url.
//
// What survives a restart: nothing of this package's own. The messages
// posted per ask (to redraw them when the ask closes) and the event ids
// already posted are kept in memory, bounded (Config.Remembered asks,
// 8 messages each); after a restart, or for an ask forgotten, a decided
// or expired notice posts a new message saying how the ask ended instead
// of redrawing the old one, whose buttons stay — clicking them then is
// refused by Decide (the ask is closed). The replay cache is in memory
// too: after a restart a request captured in the last five minutes could
// be sent again, and Decide refuses it as a second decision (or records
// the same approval again as the same person) — it can never make anyone
// else's decision. Clicks queued when Run stops are dropped (logged).
//
// Visibility: a channel message shows the packet (action, key args,
// amount, requester, deadline) to the channel's members, whoever they
// are; configure a channel whose members may see what it is sent.
package slackapp
