package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery.
const (
	HeaderSignature = "Tollgate-Signature" // t=<unix seconds>,v1=<hex>[,v1=<hex>…]
	HeaderDelivery  = "Tollgate-Delivery"  // this request's id; never reused
	HeaderEvent     = "Tollgate-Event"     // the event kind, e.g. ask.opened
)

const (
	// MaxSignatureHeader is the longest Tollgate-Signature value accepted.
	MaxSignatureHeader = 2048
	// MaxSignatures is the most v1 values one header may carry (one per
	// secret the sender signs with while a secret is being rotated).
	MaxSignatures = 8
)

// Signature is a parsed Tollgate-Signature header.
type Signature struct {
	Timestamp int64    // unix seconds, as signed
	V1        [][]byte // HMAC-SHA256 values, 32 bytes each
}

// Sign returns HMAC-SHA256(secret, "<t>.<body>"), t in decimal unix seconds.
func Sign(secret []byte, t int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(strconv.AppendInt(nil, t, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SignatureHeader returns the Tollgate-Signature value for body sent at t:
// one v1 per secret, in the order given.
func SignatureHeader(t time.Time, body []byte, secrets ...[]byte) string {
	s := Signature{Timestamp: t.Unix()}
	for _, k := range secrets {
		s.V1 = append(s.V1, Sign(k, s.Timestamp, body))
	}
	return s.String()
}

// String formats s as a Tollgate-Signature value.
func (s Signature) String() string {
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(s.Timestamp, 10))
	for _, v := range s.V1 {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(v))
	}
	return b.String()
}

// ParseSignatureHeader parses a Tollgate-Signature value: comma-separated
// key=value elements, optional blanks around each. Exactly one t (decimal
// digits) and 1..MaxSignatures v1 (64 hex digits) are required; elements
// with other keys (a future v2) are ignored. Every failure wraps
// ErrMalformed.
func ParseSignatureHeader(h string) (Signature, error) {
	var s Signature
	if len(h) > MaxSignatureHeader {
		return s, fmt.Errorf("%w: %s longer than %d bytes", ErrMalformed, HeaderSignature, MaxSignatureHeader)
	}
	seenT := false
	for elem := range strings.SplitSeq(h, ",") {
		elem = strings.Trim(elem, " \t")
		key, val, ok := strings.Cut(elem, "=")
		if !ok || key == "" {
			return Signature{}, fmt.Errorf("%w: %s element %q is not key=value", ErrMalformed, HeaderSignature, elem)
		}
		switch key {
		case "t":
			if seenT {
				return Signature{}, fmt.Errorf("%w: %s has two timestamps", ErrMalformed, HeaderSignature)
			}
			seenT = true
			t, err := parseTimestamp(val)
			if err != nil {
				return Signature{}, err
			}
			s.Timestamp = t
		case "v1":
			if len(s.V1) == MaxSignatures {
				return Signature{}, fmt.Errorf("%w: %s has more than %d signatures", ErrMalformed, HeaderSignature, MaxSignatures)
			}
			if len(val) != 2*sha256.Size {
				return Signature{}, fmt.Errorf("%w: %s v1 is not %d hex digits", ErrMalformed, HeaderSignature, 2*sha256.Size)
			}
			v, err := hex.DecodeString(val)
			if err != nil {
				return Signature{}, fmt.Errorf("%w: %s v1 is not hex", ErrMalformed, HeaderSignature)
			}
			s.V1 = append(s.V1, v)
		}
	}
	if !seenT {
		return Signature{}, fmt.Errorf("%w: %s has no timestamp", ErrMalformed, HeaderSignature)
	}
	if len(s.V1) == 0 {
		return Signature{}, fmt.Errorf("%w: %s has no v1 signature", ErrMalformed, HeaderSignature)
	}
	return s, nil
}

func parseTimestamp(v string) (int64, error) {
	if v == "" || len(v) > 18 {
		return 0, fmt.Errorf("%w: %s timestamp %q", ErrMalformed, HeaderSignature, v)
	}
	for _, c := range []byte(v) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %s timestamp %q", ErrMalformed, HeaderSignature, v)
		}
	}
	return strconv.ParseInt(v, 10, 64) // 18 digits always fit
}
