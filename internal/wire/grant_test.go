package wire

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// A grant that crosses the wire still verifies: every signed field
// survives the round trip.
func TestRoundTripVerifies(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	args := []byte(`{"amount":500,"vendor":"V-1"}`)
	d, err := freshness.PayloadDigest(args)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.UTC)
	g := &grant.Grant{RunID: "r1", StepID: "pay", Action: "payments.pay", AskID: "ask_1", PayloadDigest: d, Fence: 3, ExpiresAt: now.Add(time.Minute)}
	grant.Sign(g, "grant", priv)
	back := GrantFromProto(Grant(g))
	v := grant.NewVerifier(map[string]ed25519.PublicKey{"grant": pub})
	if err := v.Verify(back, grant.Lease{RunID: "r1", StepID: "pay", Action: "payments.pay", Fence: 3, Args: args}, now); err != nil {
		t.Fatalf("round-tripped grant: %v", err)
	}
	if GrantFromProto(nil) != nil || Grant(nil) != nil {
		t.Fatal("nil must stay nil")
	}
}
