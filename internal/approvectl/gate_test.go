package approvectl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate-dev/tollgate/client/gates"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// Into a pipe, a waiting gate prints a line when what it waits for
// changes, not on every poll (issue 16: a line every second); on a
// terminal the line counts down in place.
func TestGateWaitingLinePrintsOnChangeIntoAPipe(t *testing.T) {
	ask := &tollgatev1.Ask{Id: "r1/claims", CreatedAt: timestamppb.New(t0), ExpiresAt: timestamppb.New(t0.Add(time.Hour))}
	d := gates.Decision{Gate: "claims", Ask: ask}
	var b bytes.Buffer
	l := &gateLine{w: &b}
	for i := range 5 {
		l.show(waitingLine(d, t0.Add(time.Duration(i)*time.Second), l.term))
	}
	if n := strings.Count(b.String(), "\n"); n != 1 || !strings.Contains(b.String(), "expires at 2026-03-01T10:00:00Z") {
		t.Fatalf("five polls of an unchanged gate printed %d lines:\n%s", n, b.String())
	}
	ask.AuthorityRequired = &tollgatev1.AuthorityRequirement{Description: "role reviewer"}
	l.show(waitingLine(d, t0.Add(6*time.Second), l.term))
	if n := strings.Count(b.String(), "\n"); n != 2 || !strings.Contains(b.String(), "waiting for role reviewer") {
		t.Fatalf("a change prints a line:\n%s", b.String())
	}
	if live := waitingLine(d, t0.Add(90*time.Second), true); !strings.Contains(live, "waiting 1m30s") || !strings.Contains(live, "expires in 59m") {
		t.Fatalf("on a terminal the line counts: %q", live)
	}
}
