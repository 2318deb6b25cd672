// Package ids makes the control plane's identifiers: runs ("r_…") and
// standing approvals ("sx_…") get a random token that is readable aloud
// and unguessable enough that an id never names a run it was not made for.
//
// It enforces no invariant.
package ids
