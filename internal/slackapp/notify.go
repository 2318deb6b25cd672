package slackapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// postedMsg is one message the App posted about an ask.
type postedMsg struct {
	Channel string // as chat.postMessage answered (a D… id for a DM)
	TS      string
}

// remembered is what the App keeps about one ask and endpoint: the
// messages it posted (updated when the ask closes) and the events it
// posted them for (a delivery handed over twice posts once).
type remembered struct {
	msgs   []postedMsg
	events []string
}

// maxPerAsk bounds what is remembered for one ask and endpoint.
const maxPerAsk = 8

// Endpoints names the endpoints that want ev: the channel, for every
// kind of event, and — with DirectMessages — the Slack user of each
// person ev names who is in Users. An endpoint name is EndpointPrefix and
// a channel or user id.
func (a *App) Endpoints(ev webhook.Event) []string {
	if !notice.Deliverable(ev) {
		return nil
	}
	var out []string
	if a.cfg.Channel != "" {
		out = append(out, EndpointPrefix+a.cfg.Channel)
	}
	if a.cfg.DirectMessages {
		for _, p := range append([]string{ev.Audience}, ev.People...) {
			if sid, ok := a.people[p]; ok && p != "" && !slices.Contains(out, EndpointPrefix+sid) {
				out = append(out, EndpointPrefix+sid)
			}
		}
	}
	return out
}

// target is the channel or user an endpoint configured now names.
func (a *App) target(endpoint string) (string, bool) {
	t, ok := strings.CutPrefix(endpoint, EndpointPrefix)
	if !ok || t == "" {
		return "", false
	}
	if t == a.cfg.Channel {
		return t, true
	}
	if _, ok := a.cfg.Users[t]; ok && a.cfg.DirectMessages {
		return t, true
	}
	return "", false
}

// Deliver sends raw, a webhook.Event as webhook.Notifier.Prepare encodes
// it, to a Slack endpoint (approvals.Sender), and returns when the
// delivery is final, as pkg/webhook's Deliver does: every attempt goes to
// rec as it happens, the last with Final set. An opened, reminder or
// escalated event posts the ask's message (chat.postMessage); a decided
// or expired one redraws the messages posted about the ask
// (chat.update) to show who decided and when, or posts that when none is
// remembered. Slack's rate limits, 5xx and network errors are retried
// with backoff up to MaxAttempts (Failed after); any other refusal is
// Rejected; an endpoint not configured now is Dropped. When ctx ends
// first the result is Abandoned, not Final, and not recorded.
func (a *App) Deliver(ctx context.Context, endpoint string, raw []byte, rec webhook.Recorder) webhook.Delivery {
	ev, d, ok := a.tries.Decode(ctx, endpoint, raw, rec)
	if !ok {
		return d
	}
	target, ok := a.target(endpoint)
	if !ok || a.cfg.Packets == nil {
		return a.tries.Drop(ctx, rec, ev, endpoint, fmt.Sprintf("no Slack endpoint named %q is configured", endpoint))
	}
	return a.tries.Deliver(ctx, rec, ev, endpoint, func() (webhook.Delivery, time.Duration) {
		return a.attempt(ctx, ev, endpoint, target)
	})
}

// attempt makes one attempt: read the packet, post or update.
func (a *App) attempt(ctx context.Context, ev webhook.Event, endpoint, target string) (d webhook.Delivery, retryAfter time.Duration) {
	d = webhook.Delivery{ID: notice.NewID("slk_"), At: a.cfg.Now()}
	start := time.Now()
	defer func() { d.Duration = time.Since(start) }()
	actx, cancel := context.WithTimeout(ctx, a.cfg.AttemptTimeout)
	defer cancel()

	ask, outcome, why := notice.Fetch(ctx, actx, a.cfg.Packets, ev.AskID)
	if ask == nil {
		d.Outcome, d.Err = outcome, why
		return d, 0
	}

	key := ev.AskID + "\x00" + endpoint
	mem := a.recall(key)
	if ev.ID != "" && slices.Contains(mem.events, ev.ID) {
		d.Outcome, d.Status = webhook.Delivered, http.StatusOK // posted already
		return d, 0
	}
	v := view{kind: ev.Kind, audience: ev.Audience, openURL: a.openURL(ctx, ask, target)}
	text, blocks := render(ask, v)
	opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...), slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl()}

	closing := ev.Kind == webhook.KindDecided || ev.Kind == webhook.KindExpired
	if closing && len(mem.msgs) > 0 {
		for _, m := range mem.msgs {
			_, _, _, err := a.api.UpdateMessageContext(actx, m.Channel, m.TS, opts...)
			var se slack.SlackErrorResponse
			if errors.As(err, &se) && (se.Err == "message_not_found" || se.Err == "cant_update_message" || se.Err == "channel_not_found") {
				continue // deleted since, or no longer ours: nothing to redraw
			}
			if err != nil {
				return a.failed(ctx, actx, d, err)
			}
		}
		a.remember(key, nil, ev.ID)
		d.Outcome, d.Status = webhook.Delivered, http.StatusOK
		return d, 0
	}
	// Opened, reminder, escalated — or closing with nothing remembered to
	// redraw (posted before a restart, or forgotten): a message of its own.
	channel, ts, err := a.api.PostMessageContext(actx, target, opts...)
	if err != nil {
		return a.failed(ctx, actx, d, err)
	}
	a.remember(key, &postedMsg{Channel: channel, TS: ts}, ev.ID)
	d.Outcome, d.Status = webhook.Delivered, http.StatusOK
	return d, 0
}

// openURL is the Open button's link: for a direct message about an open
// ask, a single-use link for that person; else the ask's page.
func (a *App) openURL(ctx context.Context, ask *tollgatev1.Ask, target string) string {
	if a.cfg.Linker == nil {
		return ""
	}
	if person, ok := a.cfg.Users[target]; ok && target != a.cfg.Channel && decidable(ask.GetState()) {
		link, _, err := notice.PersonLink(a.cfg.Linker, ask, person, a.cfg.Now())
		if err == nil {
			return link
		}
		a.cfg.Log.WarnContext(ctx, "slack: no single-use link; the message links the ask's page", "ask", ask.GetId(), "error", err)
	}
	return a.cfg.Linker.AskURL(ask.GetId())
}

// failed classifies a Web API error into an attempt's outcome and the
// wait Slack asked for.
func (a *App) failed(ctx, actx context.Context, d webhook.Delivery, err error) (webhook.Delivery, time.Duration) {
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	switch {
	case ctx.Err() != nil:
		d.Outcome, d.Err = webhook.Abandoned, "stopped during the attempt"
	case errors.As(err, &rl):
		d.Outcome, d.Status, d.Err = webhook.Retrying, http.StatusTooManyRequests, "slack: rate limited"
		return d, rl.RetryAfter
	case errors.As(err, &sc):
		d.Status, d.Err = sc.Code, fmt.Sprintf("slack: HTTP %d", sc.Code)
		d.Outcome = webhook.Rejected
		if sc.Code == http.StatusRequestTimeout || sc.Code == http.StatusTooManyRequests || sc.Code >= 500 {
			d.Outcome = webhook.Retrying
		}
	case errors.As(err, &se):
		d.Status, d.Err = http.StatusOK, "slack: "+se.Err
		d.Outcome = webhook.Rejected
		switch se.Err {
		case "ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			d.Outcome = webhook.Retrying
		}
	case actx.Err() != nil:
		d.Outcome, d.Err = webhook.Retrying, fmt.Sprintf("slack: no response within %s", a.cfg.AttemptTimeout)
	default:
		d.Outcome, d.Err = webhook.Retrying, "slack: "+err.Error()
	}
	return d, 0
}

func (a *App) recall(key string) remembered {
	a.postedMu.Lock()
	defer a.postedMu.Unlock()
	r, _ := a.posted.Get(key)
	return remembered{msgs: slices.Clone(r.msgs), events: slices.Clone(r.events)}
}

// remember adds a posted message (if any) and the event to what is kept
// about key, the oldest dropped beyond maxPerAsk.
func (a *App) remember(key string, m *postedMsg, event string) {
	a.postedMu.Lock()
	defer a.postedMu.Unlock()
	r, _ := a.posted.Get(key)
	r = remembered{msgs: slices.Clone(r.msgs), events: slices.Clone(r.events)}
	if m != nil {
		r.msgs = append(r.msgs, *m)
		if len(r.msgs) > maxPerAsk {
			r.msgs = r.msgs[len(r.msgs)-maxPerAsk:]
		}
	}
	if event != "" {
		r.events = append(r.events, event)
		if len(r.events) > maxPerAsk {
			r.events = r.events[len(r.events)-maxPerAsk:]
		}
	}
	a.posted.Add(key, r)
}
