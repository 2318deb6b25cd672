package grant

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
)

func TestVerify(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	args := []byte(`{"text":"hi","n":1}`)
	digest, err := freshness.PayloadDigest(args)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *Grant {
		g := &Grant{RunID: "r", StepID: "save", Action: "notes.store", AskID: "ask_1", PayloadDigest: digest, Fence: 3, ExpiresAt: now.Add(time.Minute)}
		Sign(g, "cp1", priv)
		return g
	}
	lease := Lease{RunID: "r", StepID: "save", Action: "notes.store", Fence: 3, Args: []byte(`{ "n": 1, "text": "hi" }`)} // same payload, other spelling
	cases := []struct {
		name  string
		g     func() *Grant
		lease Lease
		at    time.Time
		want  error
	}{
		{"missing", func() *Grant { return nil }, lease, now, ErrMissing},
		{"unknown key", func() *Grant { g := fresh(); g.KeyID = "nope"; return g }, lease, now, ErrUnknownKey},
		{"other signer", func() *Grant { g := fresh(); Sign(g, "cp1", other); return g }, lease, now, ErrBadSignature},
		{"tampered ask", func() *Grant { g := fresh(); g.AskID = "ask_2"; return g }, lease, now, ErrBadSignature},
		{"tampered action", func() *Grant { g := fresh(); g.Action = "payments.pay"; return g }, Lease{RunID: "r", StepID: "save", Action: "payments.pay", Fence: 3, Args: args}, now, ErrBadSignature},
		{"other action", fresh, Lease{RunID: "r", StepID: "save", Action: "payments.pay", Fence: 3, Args: args}, now, ErrAction},
		{"no action named", fresh, Lease{RunID: "r", StepID: "save", Fence: 3, Args: args}, now, ErrAction},
		{"tampered fence", func() *Grant { g := fresh(); g.Fence = 4; return g }, lease, now, ErrBadSignature},
		{"expired", fresh, lease, now.Add(time.Minute), ErrExpired},
		{"other step", fresh, Lease{RunID: "r", StepID: "post", Action: "notes.store", Fence: 3, Args: args}, now, ErrMismatch},
		{"stale fence", fresh, Lease{RunID: "r", StepID: "save", Action: "notes.store", Fence: 2, Args: args}, now, ErrMismatch},
		{"other args", fresh, Lease{RunID: "r", StepID: "save", Action: "notes.store", Fence: 3, Args: []byte(`{"text":"HI","n":1}`)}, now, ErrPayload},
		{"not json", fresh, Lease{RunID: "r", StepID: "save", Action: "notes.store", Fence: 3, Args: []byte(`text`)}, now, ErrPayload},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := NewVerifier(map[string]ed25519.PublicKey{"cp1": pub})
			if err := v.Verify(c.g(), c.lease, c.at); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	v := NewVerifier(map[string]ed25519.PublicKey{"cp1": pub})
	g := fresh()
	if err := v.Verify(g, lease, now); err != nil {
		t.Fatalf("a good grant: %v", err)
	}
	if err := v.Verify(g, lease, now.Add(time.Second)); !errors.Is(err, ErrReused) {
		t.Fatalf("replayed grant: %v", err)
	}
}
