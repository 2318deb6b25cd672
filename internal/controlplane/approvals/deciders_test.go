package approvals

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// countingPolicy counts the Deciders questions that reach policy.
type countingPolicy struct {
	Policy
	version string
	asked   int
}

func (p *countingPolicy) Version() string { return p.version }
func (p *countingPolicy) Deciders(context.Context, []authz.Matter, authz.RecipeAsk) (authz.Deciders, error) {
	p.asked++
	return authz.Deciders{Quorum: p.asked}, nil
}

// The checks before anyone is asked read every person in the domain: the
// same matters and ask under the same policy version are asked of policy
// once per TTL, not at every start and again at every ask; another
// policy version, other matters or an older answer ask again.
func TestDecidersAnswersAreReusedPerPolicyVersion(t *testing.T) {
	pol := &countingPolicy{version: "v1"}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	c := newCachedDeciders(pol, func() time.Time { return now })
	amount := int64(90000)
	pay := []authz.Matter{{Domain: "acme", Action: "payments.pay", Amount: &amount, Currency: "INR", Requester: "alice", AgentOwner: "alice"}}
	ask := authz.RecipeAsk{Audience: "finance"}
	asked := func(ms []authz.Matter, want int) {
		t.Helper()
		if _, err := c.Deciders(context.Background(), ms, ask); err != nil || pol.asked != want {
			t.Fatalf("policy asked %d times (%v), want %d", pol.asked, err, want)
		}
	}
	asked(pay, 1)
	asked(pay, 1) // the same question: answered from the cache
	other := int64(90001)
	asked([]authz.Matter{{Domain: "acme", Action: "payments.pay", Amount: &other, Currency: "INR", Requester: "alice", AgentOwner: "alice"}}, 2)
	pol.version = "v2"
	asked(pay, 3) // a new policy version asks again
	now = now.Add(decidersTTL)
	asked(pay, 4) // and so does an answer as old as the TTL
}
