package api

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// An executor identity is refused by every approver-API handler, even if
// a listener ever authenticated one there.
func TestCallerRefusesExecutors(t *testing.T) {
	ctx := identity.WithPrincipal(context.Background(), identity.Principal{Subject: "edge-1", Kind: identity.KindExecutor})
	if _, err := Caller(ctx); !errors.Is(err, errkind.Denied) {
		t.Fatalf("caller with an executor principal: %v, want permission denied", err)
	}
	ctx = identity.WithPrincipal(context.Background(), identity.Principal{Subject: "alice", Kind: identity.KindPerson})
	if who, err := Caller(ctx); err != nil || who != "alice" {
		t.Fatalf("caller with a person: %q, %v", who, err)
	}
}
