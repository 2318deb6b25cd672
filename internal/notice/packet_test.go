package notice

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

func TestFetch(t *testing.T) {
	ask := &tollgatev1.Ask{Id: "run_01/ask_1"}
	for _, tc := range []struct {
		name    string
		ask     *tollgatev1.Ask
		err     error
		stopped bool // the caller's ctx ended
		outcome webhook.Outcome
		reason  string
	}{
		{name: "the packet", ask: ask},
		{name: "ErrNoAsk, wrapped", err: fmt.Errorf("%q: %w", ask.Id, ErrNoAsk), outcome: webhook.Rejected, reason: "ask not found"},
		{name: "gRPC NotFound", err: status.Error(codes.NotFound, "no ask"), outcome: webhook.Rejected, reason: "ask not found"},
		{name: "no ask and no error", outcome: webhook.Rejected, reason: "ask not found"},
		{name: "anything else is retried", err: errors.New("store down"), outcome: webhook.Retrying, reason: "reading the ask: store down"},
		{name: "gRPC Unavailable is retried", err: status.Error(codes.Unavailable, "later"), outcome: webhook.Retrying, reason: "reading the ask: rpc error: code = Unavailable desc = later"},
		{name: "stopped", err: context.Canceled, stopped: true, outcome: webhook.Abandoned, reason: "stopped during the attempt"},
		{name: "stopped, even for a missing ask", err: ErrNoAsk, stopped: true, outcome: webhook.Abandoned, reason: "stopped during the attempt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			actx, acancel := context.WithTimeout(ctx, time.Minute)
			defer acancel()
			var asked string
			p := PacketsFunc(func(c context.Context, id string) (*tollgatev1.Ask, error) {
				if c != actx {
					t.Errorf("Packet read under another context than the attempt's")
				}
				asked = id
				if tc.stopped {
					cancel()
				}
				return tc.ask, tc.err
			})
			got, outcome, reason := Fetch(ctx, actx, p, ask.Id)
			if asked != ask.Id || got != tc.ask || outcome != tc.outcome || reason != tc.reason {
				t.Errorf("Fetch (asked %q) = %v, %q, %q; want %v, %q, %q", asked, got, outcome, reason, tc.ask, tc.outcome, tc.reason)
			}
		})
	}
}

type linker struct {
	expires time.Time
	err     error
}

func (l *linker) AskURL(askID string) string { return "https://inbox.example/asks/" + askID }
func (l *linker) PersonLink(askID, person string, expires time.Time) (string, error) {
	l.expires = expires
	return "https://inbox.example/l/" + person + "/" + askID, l.err
}

func TestPersonLink(t *testing.T) {
	now := time.Date(2030, 5, 1, 14, 0, 0, 0, time.UTC)
	deadline := now.Add(3 * time.Hour)
	for _, tc := range []struct {
		name string
		ask  *tollgatev1.Ask
		err  error
		want time.Time
	}{
		{"until the ask's deadline", &tollgatev1.Ask{Id: "a1", ExpiresAt: timestamppb.New(deadline)}, nil, deadline},
		{"a day, for an ask without one", &tollgatev1.Ask{Id: "a1"}, nil, now.Add(24 * time.Hour)},
		{"the linker's error", &tollgatev1.Ask{Id: "a1"}, errors.New("no key"), now.Add(24 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &linker{err: tc.err}
			link, exp, err := PersonLink(l, tc.ask, "dave", now)
			if link != "https://inbox.example/l/dave/a1" || !exp.Equal(tc.want) || !l.expires.Equal(tc.want) || !errors.Is(err, tc.err) {
				t.Errorf("PersonLink = %q, %v, %v (asked until %v); want until %v, error %v", link, exp, err, l.expires, tc.want, tc.err)
			}
		})
	}
}

func TestWaiting(t *testing.T) {
	for s := range tollgatev1.AskState_name {
		st := tollgatev1.AskState(s)
		want := st == tollgatev1.AskState_ASK_STATE_PENDING || st == tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED || st == tollgatev1.AskState_ASK_STATE_IN_DOUBT
		if got := Waiting(st); got != want {
			t.Errorf("Waiting(%v) = %v, want %v", st, got, want)
		}
	}
}
