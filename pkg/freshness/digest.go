package freshness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// prefix names the hash in every digest.
const prefix = "sha256:"

// Size is the length of every digest: "sha256:" and 64 hex digits.
const Size = len(prefix) + 2*sha256.Size

// sum is the one place a digest is formatted. It writes into a fixed-size
// array, so the only allocation is the returned string: the journal's
// hash chain calls it for every record.
func sum(b []byte) string {
	s := sha256.Sum256(b)
	var out [Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], s[:])
	return string(out[:])
}

// ContentDigest is the digest of b as it is: an artifact's content, a
// step's output.
func ContentDigest(b []byte) string { return sum(b) }

// PayloadDigest is the digest of the canonical JSON of args, a JSON object
// (keys sorted, numbers as written; empty means {}): what an approval and
// a grant bind for one action. Whoever holds the args — the engine opening
// an ask, the control plane signing a grant, an executor or service
// verifying one — computes it here, from the args, so the digests agree
// however the args were spelled. It fails when args is not a JSON object.
func PayloadDigest(args []byte) (string, error) {
	canon, err := plan.Object(args).MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("payload digest: %w", err)
	}
	return sum(canon), nil
}

// PayloadsDigest is one digest over every action an ask governs:
// payloads in the ask's order, stepDigest giving each one's step id and
// PayloadDigest. None gives "" (a question binds no payload); one gives
// that payload's own digest, so a one-action ask and its grant quote the
// same digest.
func PayloadsDigest[P any](payloads []P, stepDigest func(P) (step, digest string)) string {
	switch len(payloads) {
	case 0:
		return ""
	case 1:
		_, d := stepDigest(payloads[0])
		return d
	}
	var buf [512]byte
	b := buf[:0]
	for _, p := range payloads {
		step, digest := stepDigest(p)
		b = append(append(append(append(b, step...), '='), digest...), '\n')
	}
	return sum(b)
}

// EvidenceDigest is one digest over the evidence an ask shows, in order,
// item giving each artifact's `show:` reference or attached name and the
// digest of what it showed (ValueDigest or ContentDigest); "" when it
// shows none.
func EvidenceDigest[E any](evidence []E, item func(E) (ref, name, digest string)) string {
	if len(evidence) == 0 {
		return ""
	}
	var buf [512]byte
	b := buf[:0]
	for _, e := range evidence {
		ref, name, digest := item(e)
		b = append(append(append(append(append(append(b, ref...), '|'), name...), '='), digest...), '\n')
	}
	return sum(b)
}

// ValueDigest is the digest of the canonical JSON of v, a value as
// plan.DecodeObject decodes it: what a `show:` reference showed the
// approver.
func ValueDigest(v any) string { return sum(plan.AppendCanonical(nil, v)) }

// BasisDigest is one digest over fields, in order, each quoted on a line
// of its own: the basis a decision on an ask is judged by (the engine's
// AskRun.Basis says which fields). Quoting keeps fields that contain
// newlines or quotes from running into each other.
func BasisDigest(fields ...string) string {
	var buf [512]byte
	b := buf[:0]
	for _, f := range fields {
		b = append(strconv.AppendQuote(b, f), '\n')
	}
	return sum(b)
}

// PlanDigest is the digest of the canonical JSON of p (plan.Canonical):
// stable across processes and versions of Go for the same plan.
func PlanDigest(p *plan.Plan) (string, error) {
	b, err := plan.Canonical(p)
	if err != nil {
		return "", fmt.Errorf("plan digest: %w", err)
	}
	return sum(b), nil
}

// Pack is the 32 bytes of a digest as sum writes it ("sha256:" and 64
// lower-case hex digits); ok is false for any other string, which a
// store then keeps as it is. Unpack(Pack(s)) == s whenever ok.
func Pack(s string) (d [sha256.Size]byte, ok bool) {
	if len(s) != Size || s[:len(prefix)] != prefix {
		return d, false
	}
	for i := len(prefix); i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return d, false
		}
	}
	_, err := hex.Decode(d[:], []byte(s[len(prefix):]))
	return d, err == nil
}

// Unpack is the digest whose 32 bytes are p (len(p) must be 32).
func Unpack[B ~[]byte | ~string](p B) string {
	var out [Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], []byte(p))
	return string(out[:])
}
