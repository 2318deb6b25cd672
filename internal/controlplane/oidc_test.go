package controlplane

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/oidctest"
	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// oidcEnv is a control plane whose people sign in at a real OpenID
// provider on loopback, under the dev policy with dave's finance-1m given
// to the IdP group finance-emea instead of to him by name (he keeps
// finance-100k by name, so he still sees a finance ask). frank holds it
// by name: a run whose ask nobody named in policy could decide is refused
// at its start (pkg/decidable counts people policy names; it cannot know
// who is in a group).
func oidcEnv(t *testing.T) (*env, *oidctest.Provider) {
	e, p, _ := oidcEnvKey(t)
	return e, p
}

// oidcEnvKey is oidcEnv with the private key of the static issuer
// (testIssuer), whose tokens services use.
func oidcEnvKey(t *testing.T, edits ...func(policy string) string) (*env, *oidctest.Provider, ed25519.PrivateKey) {
	t.Helper()
	p := oidctest.Start(t)
	p.AddUser("audrey")
	base, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	pol := strings.Replace(string(base), "g, dave,  role:finance-1m,   acme, _, _\n", "g, dave, role:finance-100k, acme, _, _\ng, group:finance-emea, role:finance-1m, acme, _, _\ng, frank, role:finance-1m, acme, _, _\n", 1)
	if pol == string(base) {
		t.Fatal("examples/policy.csv no longer names dave's finance-1m as this test expects")
	}
	for _, edit := range edits {
		pol = edit(pol)
	}
	path := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(path, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	people, err := identity.NewOIDCVerifier(t.Context(), identity.OIDCConfig{Issuer: p.Issuer, Audience: oidctest.ClientID})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	v, err := identity.NewVerifier(identity.Config{Issuer: testIssuer, Audience: testAudience, Keys: map[string]ed25519.PublicKey{"svc": pub}, OIDC: people})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, nil, az, echoTools(), func(c *Config) { c.Verifier = v }), p, priv
}

// signedIn is a connection carrying user's ID token, fresh from the
// provider (so it lists the groups the provider holds now).
func signedIn(t *testing.T, e *env, p *oidctest.Provider, user string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: p.IDToken(t, user), Insecure: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Membership at the identity provider changes who may decide: policy gives
// finance-1m to the group, the provider says who is in it, and each
// decision is judged on the groups of the decider's own token.
func TestIdPGroupsDecideWhoMayApprove(t *testing.T) {
	e, p := oidcEnv(t)
	p.SetGroups("alice", "finance-emea")
	p.SetGroups("dave", "finance-emea")
	startAs := func(user string) string {
		resp, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, user)).StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
		if err != nil {
			t.Fatal(err)
		}
		e.settle()
		return resp.GetRun().GetId()
	}
	asks := func(user string) tollgatev1.ApprovalServiceClient {
		return surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, user))}
	}
	decidedBy := func(runID string) []string {
		t.Helper()
		var actors []string
		tok := ""
		for {
			resp, err := tollgatev1.NewAuditServiceClient(signedIn(t, e, p, "audrey")).ListJournal(bg, &tollgatev1.ListJournalRequest{RunId: runID, PageToken: tok})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range resp.GetRecords() {
				if rec.GetKind() == "ask.decided" {
					actors = append(actors, rec.GetActor())
					if !strings.Contains(rec.GetPayloadJson(), "finance-emea") {
						t.Errorf("the decision's record does not say the authority came through finance-emea: %s", rec.GetPayloadJson())
					}
				}
			}
			if tok = resp.GetNextPageToken(); tok == "" {
				return actors
			}
		}
	}

	run1 := startAs("alice")
	_, err := asks("alice").Decide(bg, approve(run1+"/ask_1"))
	wantDenied(t, "alice, in finance-emea, approving her own payment", err, "separation of duties: alice is the requester")

	inbox, err := asks("dave").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(inbox.GetItems()) != 1 || !strings.Contains(inbox.GetItems()[0].GetWhy(), "through the identity provider's group finance-emea") {
		t.Fatalf("dave's inbox, through his group: %v %v", inbox.GetItems(), err)
	}
	if _, err := asks("dave").Decide(bg, approve(run1+"/ask_1")); err != nil {
		t.Fatalf("dave in finance-emea: %v", err)
	}
	e.settle()
	if got := decidedBy(run1); len(got) != 1 || got[0] != "dave" {
		t.Fatalf("run 1 decided by %v, want dave (a person, never the group)", got)
	}

	// The provider drops dave from the group: a fresh token lists none, and
	// the same person may decide only what his own role allows.
	p.SetGroups("dave")
	run2 := startAs("alice")
	_, err = asks("dave").Decide(bg, approve(run2+"/ask_1"))
	wantDenied(t, "dave out of finance-emea", err, "amount 485000 INR is over what dave may approve (finance-100k: limit 100000)")
	inbox, err = asks("dave").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(inbox.GetItems()) != 0 {
		t.Fatalf("dave's inbox once out of the group (he may not decide it): %v %v", inbox.GetItems(), err)
	}
	if got := decidedBy(run2); len(got) != 0 {
		t.Fatalf("a refused decision was recorded: %v", got)
	}

	// Back in the group: a fresh token decides again, as dave.
	p.SetGroups("dave", "finance-emea")
	if _, err := asks("dave").Decide(bg, approve(run2+"/ask_1")); err != nil {
		t.Fatalf("dave back in finance-emea: %v", err)
	}
	e.settle()
	if got := decidedBy(run2); len(got) != 1 || got[0] != "dave" {
		t.Fatalf("run 2 decided by %v, want dave", got)
	}
}

// Groups come only from the OpenID provider: a service token of the static
// keys that claims finance-emea is judged as its subject alone, and a
// token of a provider this server does not know is refused.
func TestGroupsOnlyFromTheProvider(t *testing.T) {
	e, p, priv := oidcEnvKey(t)
	resp, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	askID := resp.GetRun().GetId() + "/ask_1"
	forged, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "dave",
		"groups": []string{"finance-emea"}, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}).SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: forged, Insecure: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = surface{tollgatev1.NewApprovalServiceClient(c)}.Decide(bg, approve(askID))
	wantDenied(t, "a static-key token claiming finance-emea", err, "over what dave may approve (finance-100k: limit 100000)")

	q := oidctest.Start(t)
	q.SetGroups("dave", "finance-emea")
	_, err = surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, q, "dave"))}.Decide(bg, approve(askID))
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "unknown issuer") {
		t.Fatalf("another provider's token: %v, want unauthenticated: unknown issuer", err)
	}
}

// A vote that counted through a group still counts when the next vote
// comes: the earlier voter is re-checked (against the policy in force now)
// with the groups the vote was judged with, not as if they had none —
// which withdrew it and left a two-person quorum one vote short for good.
func TestGroupVoteSurvivesTheNextVote(t *testing.T) {
	e, p := quorumTwoEnv(t)
	p.SetGroups("dave", "finance-emea")
	resp, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	ask := resp.GetRun().GetId() + "/ask_1"
	if _, err := (surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "dave"))}).Decide(bg, approve(ask)); err != nil {
		t.Fatalf("dave, through finance-emea: %v", err)
	}
	e.settle()
	if _, err := (surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "frank"))}).Decide(bg, approve(ask)); err != nil {
		t.Fatalf("frank, by name: %v", err)
	}
	e.settle()
	got, err := tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "audrey")).GetAsk(bg, &tollgatev1.GetAskRequest{AskId: ask})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.GetAsk().GetState(); st != tollgatev1.AskState_ASK_STATE_APPROVED && st != tollgatev1.AskState_ASK_STATE_CONSUMED {
		t.Fatalf("two approvals, dave's through his group and frank's: the ask is %v (dave's vote withdrawn when frank's came?)", st)
	}
}

// WhoAmI says who the server takes the caller for, and the roles policy
// gives them now: through the provider's group while the token carries it,
// by name alone once it does not.
func TestWhoAmISaysTheRolesGroupsGive(t *testing.T) {
	e, p := oidcEnv(t)
	p.SetGroups("dave", "finance-emea")
	who := func() *tollgatev1.WhoAmIResponse {
		t.Helper()
		r, err := tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "dave")).WhoAmI(bg, &tollgatev1.WhoAmIRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := who()
	if r.GetSubject() != "dave" || r.GetKind() != identity.KindPerson || r.GetIssuer() != p.Issuer || strings.Join(r.GetGroups(), ",") != "finance-emea" || r.GetDomain() != "acme" {
		t.Fatalf("WhoAmI: %v", r)
	}
	if !slices.Contains(r.GetRoles(), "finance-1m") || !slices.Contains(r.GetRoles(), "finance-100k") {
		t.Fatalf("dave in finance-emea holds finance-1m through it and finance-100k by name: %v", r.GetRoles())
	}
	p.SetGroups("dave")
	if r := who(); slices.Contains(r.GetRoles(), "finance-1m") || len(r.GetGroups()) != 0 {
		t.Fatalf("out of the group: %v", r)
	}
}

// A standing approval granted through a group applies to the next matching
// ask: the granter is judged each time with the groups the grant was
// given under (their own token's then), against the policy in force. Before,
// the granter was judged without groups, so it never applied.
func TestGroupStandingApprovalApplies(t *testing.T) {
	e, p := oidcEnv(t)
	p.SetGroups("dave", "finance-emea")
	start := func() string {
		t.Helper()
		resp, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
		if err != nil {
			t.Fatal(err)
		}
		e.settle()
		return resp.GetRun().GetId()
	}
	state := func(run string) tollgatev1.RunState {
		t.Helper()
		r, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).GetRun(bg, &tollgatev1.GetRunRequest{RunId: run})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetRun().GetState()
	}
	r1 := start()
	_, err := (surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "dave"))}).Decide(bg, &tollgatev1.DecideRequest{AskId: r1 + "/ask_1",
		Decision: &tollgatev1.DecideRequest_ApproveException{ApproveException: &tollgatev1.ApproveException{
			Until: timestamppb.New(time.Now().Add(time.Hour)), Scope: "payments.pay vendor=V-1187 amount<=500000", Reason: "monthly rent"}}})
	if err != nil {
		t.Fatalf("dave grants a standing approval within what finance-emea gives him: %v", err)
	}
	e.settle()
	if st := state(r1); st != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("the granting approval approves its own ask: %v", st)
	}
	r2 := start()
	if st := state(r2); st != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("the next matching ask is not approved by the standing approval granted through a group: %v", st)
	}
}

// quorumTwoEnv is oidcEnv with two distinct approvers needed for
// payments.pay, and erin holding finance-1m by name too: a start is
// refused unless people policy names could meet the quorum (pkg/decidable
// cannot see groups).
func quorumTwoEnv(t *testing.T) (*env, *oidctest.Provider) {
	t.Helper()
	e, p, _ := oidcEnvKey(t, func(pol string) string {
		const one = "p2, acme, payments.pay, 1, requester+agent_owner, INR"
		if !strings.Contains(pol, one) {
			t.Fatal("examples/policy.csv no longer has the payments.pay floor this test raises")
		}
		return strings.Replace(pol, one, "p2, acme, payments.pay, 2, requester+agent_owner, INR", 1) + "g, erin, role:finance-1m, acme, _, _\n"
	})
	return e, p
}
