package slackapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/pkg/lru"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Decider is the approval service's Decide as a surface inside the
// control plane calls it (api.Local): the caller is the one api.As put in
// ctx, and authority, digests, expiry and the journal are the service's.
type Decider interface {
	Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error)
}

// Config is what an App needs. Nothing is read from it after New.
type Config struct {
	// BotToken is the bot's OAuth token (xoxb-…): chat:write, and
	// users:read and users:read.email when EmailIsPerson is set.
	BotToken string
	// SigningSecret is the app's signing secret: every interaction must
	// be signed with it.
	SigningSecret []byte
	// APIURL is the Web API's base, ending in "/" (default
	// "https://slack.com/api/"). A response_url is followed only when it
	// is on hooks.slack.com (https) or on APIURL's own scheme and host.
	APIURL string
	// Channel is the channel id every notice is posted to; empty: none.
	Channel string
	// DirectMessages also sends each notice to the people it names
	// (Event.People, and Event.Audience when it is a person) who have a
	// Slack user in Users, as a direct message whose Open button is a
	// single-use link for that person.
	DirectMessages bool
	// Users maps Slack user ids (U…) to Tollgate people. It is consulted
	// first.
	Users map[string]string
	// EmailIsPerson maps a Slack user not in Users to the person named by
	// their Slack profile's email (users.info), lowercased — only when
	// Slack says the address is confirmed and the account is a live,
	// non-bot member of TeamID (when set). For deployments whose people
	// are named by email.
	EmailIsPerson bool
	// TeamID, when set, is the only workspace whose users may decide.
	TeamID string

	Decider Decider        // required when SigningSecret is set
	Packets notice.Packets // required for notices
	Linker  notice.Linker  // optional: without it messages have no Open button; AskURL for the channel, PersonLink for a direct message

	Now        func() time.Time // default time.Now
	Log        *slog.Logger     // default discards
	HTTPClient *http.Client     // default: its own; redirects are never followed

	// Bounds. Zero means the default.
	MaxBody        int64         // interaction request body (default 64 KiB)
	ReplayEntries  int           // signatures remembered (default 10000); full of live ones: 503
	Remembered     int           // asks whose posted messages are remembered (default 4096)
	Workers        int           // interactions decided at once (default 4)
	Queue          int           // interactions waiting for a worker (default 64); full: 503
	DecideTimeout  time.Duration // one interaction's work (default 20s)
	AttemptTimeout time.Duration // one Web API call (default 10s)
	MaxAttempts    int           // attempts per delivery (default 5)
	BaseBackoff    time.Duration // first retry wait (default 1s), doubling
	MaxBackoff     time.Duration // longest retry wait, Retry-After included (default 1m)
}

// App is the Slack surface: a notifier (Endpoints, Deliver) and the
// interactivity endpoint (Interactions, worked by Run).
type App struct {
	cfg     Config
	api     *slack.Client
	apiURL  *url.URL
	secret  string
	people  map[string]string // person → Slack user id (DirectMessages)
	replay  *webhook.MemoryReplayCache
	jobs    chan job
	running atomic.Bool
	tries   notice.Attempts

	postedMu sync.Mutex
	posted   *lru.Cache[string, remembered] // ask id + "\x00" + endpoint
}

// EndpointPrefix starts every endpoint name the App delivers to:
// "slack:" and a channel id or a Slack user id.
const EndpointPrefix = "slack:"

// New checks cfg and returns an App.
func New(cfg Config) (*App, error) {
	if cfg.BotToken == "" {
		return nil, errors.New("slackapp: no bot token")
	}
	if strings.ContainsAny(cfg.BotToken, " \t\r\n") {
		return nil, errors.New("slackapp: bot token holds white space")
	}
	if len(cfg.SigningSecret) > 0 && cfg.Decider == nil {
		return nil, errors.New("slackapp: a signing secret needs a Decider")
	}
	if (cfg.Channel != "" || cfg.DirectMessages) && cfg.Packets == nil {
		return nil, errors.New("slackapp: notices need a Packets source")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = slack.APIURL
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("slackapp: API URL %q is not an absolute http(s) URL", cfg.APIURL)
	}
	if cfg.Channel != "" && !validTarget(cfg.Channel) {
		return nil, fmt.Errorf("slackapp: channel %q is not a Slack channel id", cfg.Channel)
	}
	people := map[string]string{}
	users := make(map[string]string, len(cfg.Users))
	for sid, person := range cfg.Users {
		if !validTarget(sid) || person == "" {
			return nil, fmt.Errorf("slackapp: user map entry %q=%q: want a Slack user id and a person", sid, person)
		}
		users[sid] = person
		if prev, ok := people[person]; ok && cfg.DirectMessages {
			return nil, fmt.Errorf("slackapp: person %q is mapped from both %s and %s", person, prev, sid)
		}
		people[person] = sid
	}
	cfg.Users = users
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	notice.Default(&cfg.MaxBody, 64<<10)
	notice.Default(&cfg.ReplayEntries, 10000)
	notice.Default(&cfg.Remembered, 4096)
	notice.Default(&cfg.Workers, 4)
	notice.Default(&cfg.Queue, 64)
	notice.Default(&cfg.MaxAttempts, 5)
	notice.Default(&cfg.DecideTimeout, 20*time.Second)
	notice.Default(&cfg.AttemptTimeout, 10*time.Second)
	notice.Default(&cfg.BaseBackoff, time.Second)
	notice.Default(&cfg.MaxBackoff, time.Minute)

	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	// The token rides in every Web API request: never follow a redirect
	// anywhere with it.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.HTTPClient = &hc

	a := &App{
		cfg:    cfg,
		api:    slack.New(cfg.BotToken, slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(&hc)),
		apiURL: u,
		secret: string(cfg.SigningSecret),
		people: people,
		replay: webhook.NewMemoryReplayCache(cfg.ReplayEntries),
		jobs:   make(chan job, cfg.Queue),
		posted: lru.New[string, remembered](cfg.Remembered),
		tries: notice.Attempts{Name: "slack", Log: cfg.Log, Now: cfg.Now,
			Max: cfg.MaxAttempts, BaseBackoff: cfg.BaseBackoff, MaxBackoff: cfg.MaxBackoff},
	}
	return a, nil
}

// validTarget reports whether s looks like a Slack channel or user id.
func validTarget(s string) bool {
	if len(s) < 2 || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
