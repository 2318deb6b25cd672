package grant

import (
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Grant is one permission.
type Grant struct {
	RunID  string
	StepID string
	// Action is what the grant permits: "server.tool" of a step, or
	// "gate.NAME" of a gate. A verifier names the action it is about to
	// perform, so a grant for one action never authorizes another.
	Action        string
	AskID         string // empty for a `without asking` step
	PayloadDigest string // freshness.PayloadDigest of the args it permits
	Fence         uint64
	ExpiresAt     time.Time
	KeyID         string
	Signature     []byte
}

// Reasons a grant is refused. Verify wraps exactly one of them.
var (
	ErrMissing      = errors.New("no grant")
	ErrUnknownKey   = errors.New("grant signed by an unknown key")
	ErrBadSignature = errors.New("grant signature does not verify")
	ErrExpired      = errors.New("grant expired")
	ErrMismatch     = errors.New("grant is for another run, step or fence")
	ErrAction       = errors.New("grant is for another action")
	ErrPayload      = errors.New("args differ from the payload the grant approved")
	ErrReused       = errors.New("grant already used")
	ErrLedger       = errors.New("cannot tell whether the grant was used")
)

// message is the signed byte string (v2: v1 with the action after the
// step; a v1 grant, which bound no action, no longer verifies).
func (g *Grant) message() []byte {
	b := []byte("tollgate-grant-v2\x00")
	lp := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	lp(g.RunID)
	lp(g.StepID)
	lp(g.Action)
	lp(g.AskID)
	lp(g.PayloadDigest)
	b = binary.BigEndian.AppendUint64(b, g.Fence)
	b = binary.BigEndian.AppendUint64(b, uint64(g.ExpiresAt.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(g.ExpiresAt.Nanosecond()))
	lp(g.KeyID)
	return b
}

// Sign fills in KeyID and Signature.
func Sign(g *Grant, keyID string, key ed25519.PrivateKey) {
	g.KeyID = keyID
	g.Signature = ed25519.Sign(key, g.message())
}

// Lease is what the grant must match: the lease as the verifier received
// it, and the action the verifier is about to perform ("server.tool" of
// the tool it will call, or "gate.NAME" of the gate that governs it) —
// what the verifier itself knows, never what the grant says.
type Lease struct {
	RunID  string
	StepID string
	Action string
	Fence  uint64
	Args   []byte
}

// Verifier checks grants against configured public keys and remembers, in
// its Ledger, the grants it has accepted, so none is used twice. Safe for
// concurrent use.
type Verifier struct {
	keys   map[string]ed25519.PublicKey
	ledger Ledger
}

// Ledger remembers accepted grants until they expire. Use records key as
// used until `until` and reports false when it already was (and has not
// expired by now); an error means the verifier cannot tell, and the grant
// is refused. A verifier whose process is short-lived (a CLI) needs a
// ledger that outlives it. The ledger is the verifier's memory: only
// verifiers that share one refuse each other's replays, so services that
// act on one grant from several processes share a ledger in Redis
// (client/grantledger; it does I/O, so it is not in this package).
type Ledger interface {
	Use(key string, until, now time.Time) (fresh bool, err error)
}

// MemoryLedger is a Ledger in memory, for a long-lived verifier.
type MemoryLedger struct {
	mu   sync.Mutex
	used map[string]time.Time // key → expiry, kept until expiry
}

// Use implements Ledger.
func (l *MemoryLedger) Use(key string, until, now time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used == nil {
		l.used = map[string]time.Time{}
	}
	for k, exp := range l.used { // forget what can no longer verify anyway
		if !now.Before(exp) {
			delete(l.used, k)
		}
	}
	if _, dup := l.used[key]; dup {
		return false, nil
	}
	l.used[key] = until
	return true, nil
}

// NewVerifier trusts keys (key id → public key) and remembers used grants
// in memory.
func NewVerifier(keys map[string]ed25519.PublicKey) *Verifier {
	return NewVerifierWithLedger(keys, &MemoryLedger{})
}

// NewVerifierWithLedger trusts keys and remembers used grants in ledger.
func NewVerifierWithLedger(keys map[string]ed25519.PublicKey, ledger Ledger) *Verifier {
	k := make(map[string]ed25519.PublicKey, len(keys))
	for id, pub := range keys {
		k[id] = pub
	}
	return &Verifier{keys: k, ledger: ledger}
}

// Key is how a ledger names a grant: its run, step and fence.
func (g *Grant) Key() string { return fmt.Sprintf("%s\x00%s\x00%d", g.RunID, g.StepID, g.Fence) }

// VerifyPayload accepts g for whichever run and step it names, provided
// it permits action and args are the payload it approved: for a service
// that performs the effect of a gate and holds the args, not a lease.
// Same checks and ledger as Verify.
func (v *Verifier) VerifyPayload(g *Grant, action string, args []byte, now time.Time) error {
	if g == nil {
		return ErrMissing
	}
	return v.Verify(g, Lease{RunID: g.RunID, StepID: g.StepID, Action: action, Fence: g.Fence, Args: args}, now)
}

// ArtifactsPayload is the payload a gate binds when it names no action
// args: its artifacts by digest, {"artifacts": {NAME: DIGEST, …}}, in
// canonical JSON. The control plane and every verifier build it here.
func ArtifactsPayload(digests map[string]string) []byte {
	m := make(map[string]any, len(digests))
	for k, d := range digests {
		m[k] = d
	}
	return plan.AppendCanonical(nil, map[string]any{"artifacts": m})
}

// GateAction is the action a gate is decided under and its grant
// permits: "gate." + its name (policy names it like any action).
func GateAction(gate string) string { return "gate." + gate }

// Verify accepts g for lease at time now, and records it as used. It
// returns an error wrapping one of the Err* reasons otherwise; then the
// caller must not perform the effect.
func (v *Verifier) Verify(g *Grant, lease Lease, now time.Time) error {
	if g == nil {
		return ErrMissing
	}
	pub, ok := v.keys[g.KeyID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownKey, g.KeyID)
	}
	if !ed25519.Verify(pub, g.message(), g.Signature) {
		return ErrBadSignature
	}
	if !now.Before(g.ExpiresAt) {
		return fmt.Errorf("%w at %s", ErrExpired, g.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if g.RunID != lease.RunID || g.StepID != lease.StepID || g.Fence != lease.Fence {
		return fmt.Errorf("%w: grant %s/%s@%d, lease %s/%s@%d", ErrMismatch, g.RunID, g.StepID, g.Fence, lease.RunID, lease.StepID, lease.Fence)
	}
	if lease.Action == "" || g.Action != lease.Action {
		return fmt.Errorf("%w: the grant permits %q, not %q", ErrAction, g.Action, lease.Action)
	}
	d, err := freshness.PayloadDigest(lease.Args)
	if err != nil || d != g.PayloadDigest {
		return fmt.Errorf("%w: received %s, approved %s", ErrPayload, d, g.PayloadDigest)
	}
	fresh, err := v.ledger.Use(g.Key(), g.ExpiresAt, now)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLedger, err)
	}
	if !fresh {
		return ErrReused
	}
	return nil
}
