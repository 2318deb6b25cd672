package notice

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Packets gives a notifier the whole decision packet of an ask, read
// without a caller (from the store): what a notice shows. An ask that
// does not exist is an error wrapping ErrNoAsk (or a gRPC NotFound
// status): its delivery is final at once (Rejected) instead of retried.
type Packets interface {
	Packet(ctx context.Context, askID string) (*tollgatev1.Ask, error)
}

// PacketsFunc adapts a function to Packets.
type PacketsFunc func(ctx context.Context, askID string) (*tollgatev1.Ask, error)

// Packet calls f.
func (f PacketsFunc) Packet(ctx context.Context, askID string) (*tollgatev1.Ask, error) {
	return f(ctx, askID)
}

// ErrNoAsk is what Packets wraps for an ask that does not exist.
var ErrNoAsk = errors.New("no such ask")

// Fetch reads askID's packet from p under actx, one attempt's context
// made from ctx. When it cannot, ask is nil and outcome and reason say
// what the attempt came to: Abandoned when ctx ended, Rejected when the
// ask does not exist (ErrNoAsk, gRPC NotFound, or no ask and no error),
// Retrying for anything else.
func Fetch(ctx, actx context.Context, p Packets, askID string) (ask *tollgatev1.Ask, outcome webhook.Outcome, reason string) {
	ask, err := p.Packet(actx, askID)
	if err == nil && ask == nil {
		err = ErrNoAsk
	}
	switch {
	case err == nil:
		return ask, "", ""
	case ctx.Err() != nil:
		return nil, webhook.Abandoned, "stopped during the attempt"
	case errors.Is(err, ErrNoAsk) || status.Code(err) == codes.NotFound:
		return nil, webhook.Rejected, "ask not found"
	}
	return nil, webhook.Retrying, "reading the ask: " + err.Error()
}

// Linker makes the links a notice carries (the web inbox, web.Site):
// PersonLink is a single-use link bound to one ask and one person, valid
// until expires (or sooner); AskURL is the ask's page behind the inbox's
// sign-in — for a notice to many (a Slack channel), or when PersonLink
// fails. Opening either never decides.
type Linker interface {
	AskURL(askID string) string
	PersonLink(askID, person string, expires time.Time) (string, error)
}

// PersonLink is person's single-use link to ask from l and when it
// stops working at the latest: the ask's deadline, or a day from now for
// an ask without one.
func PersonLink(l Linker, ask *tollgatev1.Ask, person string, now time.Time) (string, time.Time, error) {
	exp := now.Add(24 * time.Hour)
	if e := ask.GetExpiresAt(); e != nil {
		exp = e.AsTime()
	}
	link, err := l.PersonLink(ask.GetId(), person, exp)
	return link, exp, err
}

// Waiting reports whether an ask in state s still waits for a person:
// pending, evidence requested, or in doubt.
func Waiting(s tollgatev1.AskState) bool {
	switch s {
	case tollgatev1.AskState_ASK_STATE_PENDING, tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED, tollgatev1.AskState_ASK_STATE_IN_DOUBT:
		return true
	}
	return false
}
