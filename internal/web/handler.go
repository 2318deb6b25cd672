package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// API is what the inbox asks of the control plane: the API's own
// handlers as its surfaces call them (api.Local), with the caller in ctx.
type API interface {
	ListAsks(ctx context.Context, req *tollgatev1.ListAsksRequest) (*tollgatev1.ListAsksResponse, error)
	GetAsk(ctx context.Context, req *tollgatev1.GetAskRequest) (*tollgatev1.GetAskResponse, error)
	Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error)
	WhoAmI(ctx context.Context, req *tollgatev1.WhoAmIRequest) (*tollgatev1.WhoAmIResponse, error)
	GetRun(ctx context.Context, req *tollgatev1.GetRunRequest) (*tollgatev1.GetRunResponse, error)
	ListRuns(ctx context.Context, req *tollgatev1.ListRunsRequest) (*tollgatev1.ListRunsResponse, error)
	WatchAsks(ctx context.Context, req *tollgatev1.WatchAsksRequest, send func(*tollgatev1.WatchAsksResponse) error) error
}

// Caller is how the inbox makes ctx carry an authenticated caller that
// came through the web (api.As).
type Caller func(ctx context.Context, p identity.Principal, link string) context.Context

// TokenVerifier verifies an OpenID provider's ID token as the API does
// (identity.Verifier): the same issuer, audience, key pinning and groups.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (identity.Principal, error)
}

// OIDC is sign-in at the organisation's OpenID provider: the
// authorization-code flow with PKCE (S256), a state and a nonce.
type OIDC struct {
	Issuer string
	// Endpoints are the provider's (identity.Discover).
	AuthURL, TokenURL string
	ClientID          string
	ClientSecret      string   // "" for a public client (PKCE alone)
	Scopes            []string // asked for besides openid, profile and email (e.g. groups)
	Verifier          TokenVerifier
	HTTPClient        *http.Client
}

// Site is the inbox's address and keys: what a notice needs to link to it
// (AskURL, PersonLink), built before the control plane's notifiers, and
// what the inbox then serves under.
type Site struct {
	keys    keys
	base    *url.URL
	secure  bool
	linkTTL time.Duration
	now     func() time.Time
}

// NewSite checks the inbox's address and key. key seals sessions and
// signs links and CSRF tokens (at least MinKeyBytes; replicas behind one
// address share it). baseURL is the inbox's address as browsers reach it
// (https://inbox.example.com): links and the OpenID redirect are made from
// it, and cookies are Secure when it is https; plain http only on
// loopback. linkTTL bounds a link's life (0: DefaultLinkTTL).
func NewSite(key []byte, baseURL string, linkTTL time.Duration, now func() time.Time) (*Site, error) {
	k, err := newKeys(key)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	base, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("web: the base URL %q is not an http(s) address", baseURL)
	}
	secure := base.Scheme == "https"
	if !secure && !identity.Loopback(base.Host) {
		return nil, fmt.Errorf("web: the base URL %s is plain http off loopback: sessions would cross the network in the clear; serve https (or end TLS at a proxy and give its https address)", baseURL)
	}
	if linkTTL <= 0 {
		linkTTL = DefaultLinkTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Site{keys: k, base: base, secure: secure, linkTTL: linkTTL, now: now}, nil
}

// URL is the inbox's address as browsers reach it.
func (s *Site) URL() string { return s.base.String() }

// url is path under the inbox's base URL.
func (s *Site) url(path string) string { return s.base.String() + path }

// AskURL is the inbox's page of an ask (it needs a sign-in).
func (s *Site) AskURL(askID string) string { return s.url("/asks/" + askID) }

// PersonLink is a new single-use link to askID for person, good until the
// sooner of the link TTL and the ask's deadline.
func (s *Site) PersonLink(askID, person string, expires time.Time) (string, error) {
	tok, _, err := s.keys.mintLink(askID, person, expires, s.now(), s.linkTTL)
	if err != nil {
		return "", err
	}
	return s.url("/l/" + tok), nil
}

// Config is what the inbox needs.
type Config struct {
	API    API
	Caller Caller
	Site   *Site
	OIDC   *OIDC
	// DevUsers, when set, offers a picker of these users on the sign-in
	// page, each signed in as a person of DevIssuer (controlplane --dev
	// only: it is no sign-in at all).
	DevUsers  []string
	DevIssuer string
	// LinkSignsIn lets a link alone sign its person in, for its one ask
	// (the one-click approval of an email): off, a link asks its holder
	// to sign in as the person it names.
	LinkSignsIn bool
	SessionTTL  time.Duration // default 8h
	// Mount serves more handlers under the inbox's address (Slack's
	// interactivity endpoint): path pattern → handler.
	Mount map[string]http.Handler
	Now   func() time.Time
	Log   *slog.Logger
}

// Handler is the web inbox.
type Handler struct {
	*Site
	cfg   Config
	pages map[string]*template.Template
	mux   *http.ServeMux
	oauth *oauth2.Config
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New checks cfg and returns the inbox.
func New(cfg Config) (*Handler, error) {
	if cfg.API == nil || cfg.Caller == nil {
		return nil, errors.New("web: an API and a Caller are required")
	}
	if cfg.Site == nil {
		return nil, errors.New("web: a Site is required")
	}
	if cfg.OIDC == nil && len(cfg.DevUsers) == 0 {
		return nil, errors.New("web: nobody could sign in: configure an OpenID provider (or dev users, in --dev)")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, Site: cfg.Site}
	var err error
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if o := cfg.OIDC; o != nil {
		if o.Verifier == nil {
			return nil, errors.New("web: OpenID sign-in needs the token verifier")
		}
		if o.HTTPClient == nil {
			// The code exchange is bounded like every call to the provider.
			c := *o
			c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
			h.cfg.OIDC = &c
		}
		// A public client sends its id in the form: Basic with an empty
		// secret makes providers take it for a confidential one.
		style := oauth2.AuthStyleInParams
		if o.ClientSecret != "" {
			style = oauth2.AuthStyleAutoDetect
		}
		h.oauth = &oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Endpoint: oauth2.Endpoint{AuthURL: o.AuthURL, TokenURL: o.TokenURL, AuthStyle: style},
			RedirectURL: h.url("/signin/callback"), Scopes: append([]string{"openid", "profile", "email"}, o.Scopes...)}
	}
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.inbox)
	m.HandleFunc("GET /inbox/list", h.inboxList)
	m.HandleFunc("GET /events", h.events)
	m.HandleFunc("GET /asks/{run}/{ask}", h.askPage)
	m.HandleFunc("POST /asks/{run}/{ask}", h.decide)
	m.HandleFunc("GET /runs", h.runsPage)
	m.HandleFunc("GET /runs/{run}", h.runPage)
	m.HandleFunc("GET /l/{token}", h.linkPage)
	m.HandleFunc("POST /l/{token}", h.linkDecide)
	m.HandleFunc("GET /signin", h.signinPage)
	m.HandleFunc("POST /signin/dev", h.signinDev)
	m.HandleFunc("GET /signin/start", h.signinStart)
	m.HandleFunc("GET /signin/callback", h.signinCallback)
	m.HandleFunc("POST /signout", h.signout)
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	for p, hd := range h.cfg.Mount {
		m.Handle(p, hd)
	}
	h.mux = m
}

// maxForm bounds a form a page posts.
const maxForm = 64 << 10

// ServeHTTP serves the inbox with the headers every page carries: no
// framing (clickjacking), no sniffing, a strict content policy (no inline
// script, no third-party anything), no referrer beyond the origin, and no
// caching of pages that show decisions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	if h.secure {
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	}
	h.mux.ServeHTTP(w, r)
}
