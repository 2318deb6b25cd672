// Package web is the web inbox: people who never open a terminal sign in
// (at the organisation's OpenID provider, authorization code with PKCE; or
// the dev picker in --dev), read the whole decision packet and decide, in
// server-rendered HTML with no build step, no CDN and no script but the
// live updates. It decides nothing itself: every read and decision is the
// API's own handler (api.Local), with the signed-in person as the caller
// and the web as the surface, so authority, digests, visibility and the
// journal are the same as from approvectl.
//
// Invariants it enforces, and where:
//   - I9 only who may, decides: the caller is the session's person, from a
//     sealed cookie (AES-GCM under a key derived from the web key; the
//     person can neither read nor change it) minted only after the
//     provider's ID token was verified as the API verifies one
//     (TokenVerifier) and carried this browser's state and nonce
//     (signin.go). A page offers decisions only when the API says the
//     person may decide now (GetAsk.may_decide) and says why not
//     otherwise; the API judges again at the decision.
//   - No state change without a deliberate POST from the inbox's own page:
//     every form carries a CSRF token bound to the session (HMAC under a
//     key of its own), and a request another site sent (Origin,
//     Sec-Fetch-Site) is refused (session.go); GET never decides. Pages
//     forbid framing and any script, style or form target not the
//     inbox's own (ServeHTTP's headers).
//   - I6 an approval binds what the page showed: each form posts the
//     payload and evidence digests the page was drawn with; the API
//     refuses them if the ask changed since.
//   - Links open, never decide (links.go): a notice's link is signed, bound
//     to one ask and one person, good until the sooner of its TTL and the
//     ask's deadline. Opening it shows the packet — after signing in as
//     that person, unless the operator lets links sign in — and a decision
//     through it records its id, so the engine refuses a second one on any
//     replica (engine.ErrLinkUsed).
//   - Others' words are shown as text: html/template escapes them, and
//     pkg/humantext escapes control characters and bidi overrides first.
package web
