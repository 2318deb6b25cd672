package controlplane

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// Every RPC of the control plane — unary and streaming — refuses bad
// tokens: expired, wrong audience, wrong issuer, another key, alg none.
func TestBadTokensAreRefusedEverywhere(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "graph-ask-demo")
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	mint := func(priv ed25519.PrivateKey, iss, aud string, ttl time.Duration, at time.Time) string {
		tok, err := identity.Mint(priv, "k", iss, aud, "alice", ttl, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	b64 := base64.RawURLEncoding.EncodeToString
	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(`{"sub":"alice","iss":"`+testIssuer+`","aud":"`+testAudience+`","exp":9999999999}`)) + "."
	tokens := map[string]string{
		"expired":        mint(e.priv, testIssuer, testAudience, time.Minute, now.Add(-time.Hour)),
		"wrong audience": mint(e.priv, testIssuer, "someone-else", time.Hour, now),
		"wrong issuer":   mint(e.priv, "evil", testAudience, time.Hour, now),
		"other key":      mint(other, testIssuer, testAudience, time.Hour, now),
		"alg none":       none,
	}
	for name, tok := range tokens {
		conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: tok, Insecure: true}))
		if err != nil {
			t.Fatal(err)
		}
		runs := tollgatev1.NewRunServiceClient(conn)
		if _, err := runs.GetRun(bg, &tollgatev1.GetRunRequest{RunId: r.GetId()}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s, unary: %v", name, err)
		}
		if _, err := tollgatev1.NewApprovalServiceClient(conn).Decide(bg, &tollgatev1.DecideRequest{AskId: r.GetId() + "/ask_1",
			Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s, decide: %v", name, err)
		}
		stream, err := runs.WatchRun(bg, &tollgatev1.WatchRunRequest{RunId: r.GetId()})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s, stream: %v", name, err)
		}
		conn.Close()
	}
	if got := e.get("alice", r.GetId()); got.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("nothing a bad token sent may have changed the run: %v", got.GetState())
	}
}
