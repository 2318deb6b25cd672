package webhook

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"
)

// FuzzVerifyPayload: whatever headers and body arrive, VerifyPayload never
// panics and accepts only a body signed with the secret. A body signed
// and then changed in any byte, or its signature header changed, is
// refused.
func FuzzVerifyPayload(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1767182400, 0)
	f.Add([]byte(`{"id":"d_1","kind":"ask.opened"}`), "", "d_1", "ask.opened", uint16(0))
	f.Add([]byte(`{}`), "t=1,v1=00", "x", "y", uint16(3))
	f.Add([]byte(``), "t=1767182400,v1=", "d_1", "ask.opened", uint16(9))
	f.Fuzz(func(t *testing.T, body []byte, sigHeader, id, kind string, flip uint16) {
		v := &Verifier{Secrets: [][]byte{secret}, Seen: NewMemoryReplayCache(16), Now: func() time.Time { return now }}
		h := http.Header{}
		h.Set(HeaderSignature, sigHeader)
		h.Set(HeaderDelivery, id)
		h.Set(HeaderEvent, kind)
		if _, err := v.VerifyPayload(context.Background(), h, body); err == nil && sigHeader != SignatureHeader(now, body, secret) {
			// A header that is not ours may still verify if it carries
			// our signature among others; it must then hold it.
			if s, perr := ParseSignatureHeader(sigHeader); perr != nil || !v.signed(s, body) {
				t.Fatalf("accepted %q over %q", sigHeader, body)
			}
		}
		// Signed for real, then changed: refused.
		signed := SignatureHeader(now, body, secret)
		h.Set(HeaderSignature, signed)
		changed := bytes.Clone(body)
		if len(changed) > 0 {
			changed[int(flip)%len(changed)] ^= 0x01
		} else {
			changed = []byte{'x'}
		}
		v2 := &Verifier{Secrets: [][]byte{secret}, Seen: NewMemoryReplayCache(16), Now: func() time.Time { return now }}
		if _, err := v2.VerifyPayload(context.Background(), h, changed); err == nil {
			t.Fatalf("accepted a changed body %q signed as %q", changed, body)
		}
	})
}
