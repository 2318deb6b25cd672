package approvectl

import (
	"testing"

	"github.com/tollgate-dev/tollgate/internal/oidctest"
)

// startIdP serves a real OpenID provider on loopback (internal/oidctest);
// its issuer is the returned URL. dave (password oidctest.Password) is in
// the group finance-emea.
func startIdP(t *testing.T) string {
	t.Helper()
	p := oidctest.Start(t)
	p.SetGroups("dave", "finance-emea")
	return p.Issuer
}
