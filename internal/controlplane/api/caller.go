package api

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// Caller is the authenticated principal; never a request field.
//
// Executors are not callers of this API: an executor identity is refused
// here even though the API listener never authenticates one (defence in
// depth should a listener ever serve both).
func Caller(ctx context.Context) (string, error) {
	p, ok := identity.FromContext(ctx)
	if !ok {
		return "", fmt.Errorf("no authenticated caller: %w", errkind.Unauthenticated)
	}
	if p.Kind == identity.KindExecutor {
		return "", fmt.Errorf("executor %s may not call the approver api: %w", p.Subject, errkind.Denied)
	}
	return p.Subject, nil
}
