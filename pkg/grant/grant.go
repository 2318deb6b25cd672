// Package grant is the control plane's signed permission to run one
// side-effecting step once, with one exact payload, under one fence. The
// control plane signs; executors — and any service that performs an effect
// — verify before they act, so a gate holds even if the control plane had
// a bug (I1, I2, I6). The encoding is the one documented on the proto
// message tollgate.v1.Grant. Pure: no I/O, no clock of its own.
package grant

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Grant is one permission.
type Grant struct {
	RunID         string
	StepID        string
	AskID         string // empty for a `without asking` step
	PayloadDigest string // "sha256:<hex>" of the canonical args
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
	ErrPayload      = errors.New("args differ from the payload the grant approved")
	ErrReused       = errors.New("grant already used")
)

// message is the signed byte string.
func (g *Grant) message() []byte {
	b := []byte("tollgate-grant-v1\x00")
	lp := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	lp(g.RunID)
	lp(g.StepID)
	lp(g.AskID)
	lp(g.PayloadDigest)
	b = binary.BigEndian.AppendUint64(b, g.Fence)
	b = binary.BigEndian.AppendUint64(b, uint64(g.ExpiresAt.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(g.ExpiresAt.Nanosecond()))
	lp(g.KeyID)
	return b
}

// PayloadDigest is "sha256:" and the hex SHA-256 of the canonical JSON of
// args (keys sorted, numbers as written).
func PayloadDigest(args []byte) (string, error) {
	obj := plan.Object(args)
	canon, err := obj.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("payload digest: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Sign fills in KeyID and Signature.
func Sign(g *Grant, keyID string, key ed25519.PrivateKey) {
	g.KeyID = keyID
	g.Signature = ed25519.Sign(key, g.message())
}

// Lease is what the grant must match: the lease as the verifier received
// it.
type Lease struct {
	RunID  string
	StepID string
	Fence  uint64
	Args   []byte
}

// Verifier checks grants against configured public keys and remembers the
// grants it has accepted, so none is used twice. Safe for concurrent use.
type Verifier struct {
	keys map[string]ed25519.PublicKey
	mu   sync.Mutex
	used map[string]time.Time // run/step/fence → expiry, kept until expiry
}

// NewVerifier trusts keys (key id → public key).
func NewVerifier(keys map[string]ed25519.PublicKey) *Verifier {
	k := make(map[string]ed25519.PublicKey, len(keys))
	for id, pub := range keys {
		k[id] = pub
	}
	return &Verifier{keys: k, used: map[string]time.Time{}}
}

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
	d, err := PayloadDigest(lease.Args)
	if err != nil || d != g.PayloadDigest {
		return fmt.Errorf("%w: received %s, approved %s", ErrPayload, d, g.PayloadDigest)
	}
	key := fmt.Sprintf("%s\x00%s\x00%d", g.RunID, g.StepID, g.Fence)
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, exp := range v.used { // forget what can no longer verify anyway
		if !now.Before(exp) {
			delete(v.used, k)
		}
	}
	if _, dup := v.used[key]; dup {
		return ErrReused
	}
	v.used[key] = g.ExpiresAt
	return nil
}
