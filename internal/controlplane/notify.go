package controlplane

import (
	"context"
	"maps"
	"slices"
	"strings"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/emailnotify"
	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/internal/slackapp"
	"github.com/tollgate-dev/tollgate/internal/web"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// notices is the outbox's one notifier over every channel a notice goes
// out on: webhooks (pkg/webhook), Slack (slackapp) and email
// (emailnotify; each person's own channel, so always with their link). Each notice carries
// the web inbox's address of its ask and, for each person it names, a
// single-use link bound to that ask and that person (web.Site), encoded
// once when the commit that causes it is built (the people it names, and
// those policy finds able to decide an ask of a role: the payload's
// deciders); Slack endpoints are named
// slackapp.EndpointPrefix….
type notices struct {
	hooks *webhook.Notifier
	slack *slackapp.App         // nil: no Slack
	email *emailnotify.Notifier // nil: no email
	site  *web.Site             // nil: no web inbox, no links
	// personLinks puts the people's links in webhook payloads: off where
	// a link alone signs its person in (--web-link-signs-in), since a
	// webhook endpoint is not each person's own channel.
	personLinks bool
}

// Prepare implements approvals.Notifier. The people's links go into the
// encoded event only when a webhook endpoint wants it: the same bytes are
// stored once per endpoint, and Slack and email sign each person's link
// as they send (a person's queued mail never carries another's link).
func (n notices) Prepare(ev webhook.Event) ([]byte, []string, error) {
	if n.site != nil {
		p := maps.Clone(ev.Payload)
		if p == nil {
			p = map[string]any{}
		}
		p["ask_url"] = n.site.AskURL(ev.AskID)
		ev.Payload = p
	}
	raw, eps, err := n.hooks.Prepare(ev)
	if err != nil {
		return nil, nil, err
	}
	if len(eps) > 0 && n.site != nil && n.personLinks && ev.Kind != webhook.KindDecided && ev.Kind != webhook.KindExpired {
		links := map[string]string{}
		people := ev.People
		if ds, ok := ev.Payload["deciders"].([]string); ok {
			people = append(slices.Clip(people), ds...)
		}
		for _, person := range people {
			if l, err := n.site.PersonLink(ev.AskID, person, ev.ExpiresAt); err == nil {
				links[person] = l
			}
		}
		if len(links) > 0 {
			ev.Payload["links"] = links
			if raw, eps, err = n.hooks.Prepare(ev); err != nil {
				return nil, nil, err
			}
		}
	}
	if n.slack != nil {
		eps = append(eps, n.slack.Endpoints(ev)...)
	}
	if n.email != nil {
		eps = append(eps, n.email.Endpoints(ev)...)
	}
	return raw, eps, nil
}

// Deliver implements approvals.Sender.
func (n notices) Deliver(ctx context.Context, endpoint string, raw []byte, rec webhook.Recorder) webhook.Delivery {
	if n.slack != nil && strings.HasPrefix(endpoint, slackapp.EndpointPrefix) {
		return n.slack.Deliver(ctx, endpoint, raw, rec)
	}
	if n.email != nil && strings.HasPrefix(endpoint, emailnotify.EndpointPrefix) {
		return n.email.Deliver(ctx, endpoint, raw, rec)
	}
	return n.hooks.Deliver(ctx, endpoint, raw, rec)
}

// packetsOf is the server's packets as the Slack and email notifiers read
// them: asked of server() when a notice goes out, since the server is
// built after them (with the notifier that holds them).
func packetsOf(server func() *Server) notice.Packets {
	return notice.PacketsFunc(func(ctx context.Context, id string) (*tollgatev1.Ask, error) { return server().Packet(ctx, id) })
}
