// Package webhook tells people's systems about asks (DESIGN.md §5): a JSON
// POST per event to each endpoint configured for the ask's audience — a
// role or a person — signed with HMAC-SHA256, retried with backoff, every
// attempt handed to a Recorder. It also ships the receiver's side: a
// Verifier (and http middleware) that rejects bad signatures, stale
// timestamps and replays.
//
// It lives under pkg/ because receivers are other programs: they import
// Verifier, which Go forbids for an internal/ package. It imports only the
// standard library.
//
// # Wire format
//
// A delivery is POST <endpoint URL> with
//
//	Content-Type: application/json
//	Tollgate-Event: ask.opened
//	Tollgate-Delivery: dlv_<32 hex>
//	Tollgate-Signature: t=1767182400,v1=<64 hex>[,v1=<64 hex>…]
//
//	{"delivery_id":"dlv_…","attempt":1,"event":{"id":"evt_…","kind":"ask.opened","ask_id":…}}
//
// v1 is hex(HMAC-SHA256(secret, "<t>.<body>")) over the exact body bytes,
// t the decimal unix seconds of the same header. There is one v1 per secret
// the endpoint is signed with (Endpoint.Secret, then Endpoint.OldSecrets),
// so a secret can be rotated on either side without a gap: the sender signs
// with old and new, or the receiver accepts old and new (Verifier.Secrets).
// Elements other than t and v1 are ignored, leaving room for a v2.
//
// Each attempt is a new request: a new Tollgate-Delivery id, a new
// timestamp, a new signature. The delivery id and the kind are inside the
// signed body too, and the Verifier requires the headers to match them, so
// a replayed request cannot dodge the replay cache by changing its
// Tollgate-Delivery header. Event.ID stays the same across attempts and
// endpoints: a receiver that must act once per event dedupes on it.
//
// # Delivery
//
// Notify never blocks: it encodes the event and queues one delivery per
// endpoint that wants it, or, past Config.QueueSize pending deliveries,
// drops it (recorded as Dropped, ErrQueueFull). Run sends, with a few
// requests in flight; it retries network errors, timeouts, 408, 429 and
// 5xx after BaseBackoff·2^(n-1) (capped, with jitter) or a longer
// Retry-After (capped), up to MaxAttempts; it does not retry other
// statuses, and never follows a redirect. Each attempt becomes a Delivery
// for the Recorder. Pending deliveries are held in memory only.
//
// A sender that keeps pending deliveries durable instead (the control
// plane keeps them in its store, beside the run they are about) uses
// Prepare, which encodes an event and names the endpoints that want it,
// and Deliver, which makes one stored delivery's attempts, as Run would,
// and returns when it is final (deliver.go). Such a sender delivers at
// least once: a delivery taken over from a process that died mid-request
// may reach the receiver twice, under two Tollgate-Delivery ids and one
// Event.ID.
//
// It enforces no invariant of DESIGN.md §1: a notice tells people an ask
// waits and decides nothing. Every attempt goes to the Recorder, which the
// approvals desk journals (internal/controlplane/approvals, notices.go).
package webhook
