// Package emailnotify is the email surface of notices: an SMTP notifier
// that sends each person an ask names the decision packet and their own
// link, through the outbox like webhooks and Slack (Endpoints names the
// deliveries when the commit is built, Deliver sends one).
//
// What it enforces:
//
//   - Opening never decides. A notice about an open ask carries the
//     person's single-use link (notice.PersonLink: bound to that ask and
//     that person, valid until the ask's deadline or the inbox's link TTL,
//     whichever is sooner), with the words "Opening this link never
//     approves anything; you decide on the page." The message holds no
//     image, no remote resource, no script and no tracking of any kind;
//     opening it tells nobody anything. A new link is minted for every
//     attempt; one never delivered is never seen.
//   - One message, one person. Each endpoint is "email:" and a person;
//     the message has one recipient (one RCPT, one To) at the address the
//     configuration gives that person when it is sent — Addresses, or,
//     with EmailIsPerson, the person's name when it is a bare address. A
//     person without one is never named as an endpoint, and a delivery
//     to one (the configuration changed since) is Dropped.
//   - Nothing from a run is a header or markup. Subject is the ask's
//     title on one line (every control character a space, bidi overrides
//     removed), clipped and Q-encoded (mime.QEncoding) when it is not
//     ASCII, so a title with CR/LF cannot add a header or a recipient;
//     in the body every text from the packet goes through
//     humantext.Escape, and the HTML part through html/template.
//   - No password in clear. TLS is STARTTLS (the default; a server that
//     does not offer it gets nothing: Rejected) or implicit TLS, with the
//     server's certificate verified; "none" is accepted only for a server
//     on loopback, and never with a username (AUTH PLAIN only over TLS).
//
// Which notices: every kind. Opened, reminder and escalated notices carry
// the packet (title, summary, each action as server·tool with its amount
// and args, the consequence, who asked, why it came to this person and
// who may decide, the deadline in UTC as every surface prints it
// (humantext.Deadline) and what expiry does (plan.ExpiryOutcome), the
// payload digest) and the link. Decided and expired notices are a short
// "how it ended" mail — who decided, when, why — with no link: there is
// nothing left to open. A closed ask's reminder (a race with its
// decision) carries no link either.
//
// Delivery: one SMTP session per attempt (at most Concurrency at once),
// every step under AttemptTimeout (a dialer timeout, then the connection's
// deadline; ctx ending closes it). A 4xx reply, a network or TLS error or
// a timeout is retried with backoff (Retrying, then Failed after
// MaxAttempts); a 5xx reply is Rejected. Delivery.Status is the SMTP reply
// code. Each message has a unique Message-ID, the event's id in
// X-Tollgate-Event (the same across attempts and people, for dedupe) and
// Auto-Submitted: auto-generated (no auto-replies). A timeout after the
// server took the message but before its reply reached us can make a
// retry send it twice: X-Tollgate-Event tells them apart.
//
// What survives a restart: nothing of this package's own. The events sent
// per endpoint are remembered in memory (bounded) so a delivery handed
// over twice is mailed once; after a restart, it may be mailed again.
//
// Visibility: the mail carries the packet to the person's mailbox, which
// their mail provider (and anyone they forward it to) can read; the link
// in it is theirs alone, single-use, and — unless the inbox's links sign
// in (--web-link-signs-in) — needs them to sign in as themselves.
package emailnotify
