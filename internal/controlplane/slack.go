package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/slackapp"
	"github.com/tollgate-dev/tollgate/internal/web"
)

// decideFunc is slackapp.Decider over a function.
type decideFunc func(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error)

func (f decideFunc) Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
	return f(ctx, req)
}

// newSlack builds the Slack surface from the options (nil without
// --slack-token-file). Slack's clicks decide through the server's one
// path (Server.Local) and its messages read the server's packets; both
// are asked of server() when a notice goes out or a click comes in, after
// the server is built (it is built with the notifier that holds this).
func newSlack(o *Options, site *web.Site, server func() *Server, log *slog.Logger) (*slackapp.App, error) {
	if o.SlackTokenFile == "" {
		if o.SlackSecretFile != "" || o.SlackChannel != "" || len(o.SlackUsers) > 0 {
			return nil, errors.New("--slack-* needs --slack-token-file: the bot token that posts asks")
		}
		return nil, nil
	}
	token, err := os.ReadFile(o.SlackTokenFile)
	if err != nil {
		return nil, fmt.Errorf("--slack-token-file: %w", err)
	}
	var secret []byte
	if o.SlackSecretFile != "" {
		if site == nil {
			return nil, errors.New("--slack-signing-secret-file: Slack's buttons call the web listener (POST /slack/interactions): give --web-listen too")
		}
		b, err := os.ReadFile(o.SlackSecretFile)
		if err != nil {
			return nil, fmt.Errorf("--slack-signing-secret-file: %w", err)
		}
		secret = []byte(strings.TrimSpace(string(b)))
	}
	users := map[string]string{}
	for _, u := range o.SlackUsers {
		id, person, ok := strings.Cut(u, "=")
		if !ok || id == "" || person == "" {
			return nil, fmt.Errorf("--slack-user %q: want SLACK_USER_ID=PERSON", u)
		}
		users[id] = person
	}
	cfg := slackapp.Config{BotToken: strings.TrimSpace(string(token)), SigningSecret: secret, APIURL: o.SlackAPIURL, Channel: o.SlackChannel,
		DirectMessages: o.SlackDM, Users: users, EmailIsPerson: o.SlackEmail, TeamID: o.SlackTeam, Log: log,
		Decider: decideFunc(func(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
			return server().Local().Decide(ctx, req)
		}),
		Packets: packetsOf(server)}
	if site != nil {
		cfg.Linker = site
	}
	return slackapp.New(cfg)
}
