package approvals

import (
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// devPolicy is the dev policy of examples/policy.csv: alice requests and
// holds finance (so separation of duties refuses her), bob may approve up
// to 100000, dave up to 1000000, carol acts for dave within a window.
func devPolicy(t testing.TB) *authz.Authorizer {
	t.Helper()
	a, err := authz.New(authz.Config{PolicyPath: "../../../examples/policy.csv"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// devDesk is a desk over the dev policy in domain acme.
func devDesk(t testing.TB) *Desk {
	t.Helper()
	return New(Config{Policy: devPolicy(t), Domain: "acme"})
}
