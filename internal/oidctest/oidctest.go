package oidctest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"
)

const (
	// ClientID is the public native client (approvectl).
	ClientID = "approvectl"
	// Password is every user's password.
	Password = "pw"
	// RedirectURL is the client's registered loopback redirect; any port
	// is accepted at run time (RFC 8252 §7.3).
	RedirectURL = "http://127.0.0.1/callback"
	// WebRedirectURL is the web inbox's sign-in callback on loopback,
	// registered on the same client (any port).
	WebRedirectURL = "http://127.0.0.1/signin/callback"
)

// DefaultUsers are the users a Provider starts with.
var DefaultUsers = []string{"dave", "alice", "bob", "erin", "frank"}

// Provider is a running OpenID provider owned by one test.
type Provider struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:PORT, no
	// trailing slash), also its base URL.
	Issuer string
	st     *idpStorage
	srv    *httptest.Server
}

// Start starts a provider signing with a fresh RS256 key (kid "rsa-1"),
// with DefaultUsers and no groups. It is closed when the test ends.
func Start(t testing.TB) *Provider {
	t.Helper()
	us := &users{m: map[string]*storage.User{}}
	for _, u := range DefaultUsers {
		us.add(u)
	}
	clients := map[string]*storage.Client{ClientID: storage.NativeClient(ClientID, RedirectURL, WebRedirectURL)}
	st := &idpStorage{Storage: storage.NewStorageWithClients(us, clients), users: us,
		groups: map[string][]string{}, claims: map[string]map[string]any{}}
	k, err := newKey("RS256", "rsa-1")
	if err != nil {
		t.Fatal(err)
	}
	st.rotate(k, false)
	var dh deferred // the issuer is the server's URL, known only once it listens
	srv := httptest.NewServer(&dh)
	t.Cleanup(srv.Close)
	// logger nil: a non-nil one would call slog.SetDefault for the process.
	dh.set(exampleop.SetupServer(srv.URL, st, nil, false))
	return &Provider{Issuer: srv.URL, st: st, srv: srv}
}

// AddUser adds a user (ID == username) with the password Password.
func (p *Provider) AddUser(name string) { p.st.users.add(name) }

// SetGroups sets a user's groups claim; tokens issued afterwards carry it.
func (p *Provider) SetGroups(user string, groups ...string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.groups[user] = slices.Clone(groups)
}

// SetClaim sets an extra claim on a user's ID tokens (e.g. "email",
// "email_verified", or a hostile value); value nil removes it.
func (p *Provider) SetClaim(user, name string, value any) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	if p.st.claims[user] == nil {
		p.st.claims[user] = map[string]any{}
	}
	if value == nil {
		delete(p.st.claims[user], name)
		return
	}
	p.st.claims[user][name] = value
}

// Rotate makes a fresh key of alg ("RS256" or "ES256") with id kid the
// signing key. With keepOld the keys published so far stay in the JWKS;
// without it only the new key is published.
func (p *Provider) Rotate(alg, kid string, keepOld bool) error {
	k, err := newKey(alg, kid)
	if err != nil {
		return err
	}
	p.st.rotate(k, keepOld)
	return nil
}

// PrivateKey is the private key with id kid (published or not), for tests
// that forge tokens; nil if there is none.
func (p *Provider) PrivateKey(kid string) crypto.Signer {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	for _, k := range p.st.all {
		if k.id == kid {
			return k.priv
		}
	}
	return nil
}

// KeyFetches is how many times the JWKS was served.
func (p *Provider) KeyFetches() int {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	return p.st.fetches
}

// OAuth2Config is the public client's configuration against the provider,
// redirecting to redirect (RedirectURL when empty).
func (p *Provider) OAuth2Config(redirect string) *oauth2.Config {
	if redirect == "" {
		redirect = RedirectURL
	}
	return &oauth2.Config{ClientID: ClientID, RedirectURL: redirect,
		Scopes: []string{zoidc.ScopeOpenID, zoidc.ScopeProfile, zoidc.ScopeEmail, zoidc.ScopeOfflineAccess},
		Endpoint: oauth2.Endpoint{AuthURL: p.Issuer + "/auth", TokenURL: p.Issuer + "/oauth/token",
			DeviceAuthURL: p.Issuer + "/device_authorization",
			// A public client sends its id in the form; Basic with an empty
			// secret makes zitadel treat it as confidential.
			AuthStyle: oauth2.AuthStyleInParams}}
}

// CodeFlowToken signs user in through the authorization code flow with
// PKCE, posting the provider's login form over HTTP, and returns the
// token response; its ID token is IDToken(tok).
func (p *Provider) CodeFlowToken(ctx context.Context, user string) (*oauth2.Token, error) {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cfg := p.OAuth2Config("")
	verifier := oauth2.GenerateVerifier()
	loc, err := redirect(ctx, hc, http.MethodGet, cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier)), nil)
	if err != nil {
		return nil, fmt.Errorf("authorize: %w", err)
	}
	form := url.Values{"id": {loc.Query().Get("authRequestID")}, "username": {user}, "password": {Password}}
	if loc, err = redirect(ctx, hc, http.MethodPost, p.Issuer+"/login/username", form); err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	if loc, err = redirect(ctx, hc, http.MethodGet, loc.String(), nil); err != nil {
		return nil, fmt.Errorf("callback: %w", err)
	}
	if e := loc.Query().Get("error"); e != "" {
		return nil, fmt.Errorf("authorize: %s: %s", e, loc.Query().Get("error_description"))
	}
	return cfg.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
}

// IDToken signs user in (CodeFlowToken) and returns the ID token, failing
// the test on any error.
func (p *Provider) IDToken(t testing.TB, user string) string {
	t.Helper()
	tok, err := p.CodeFlowToken(t.Context(), user)
	if err != nil {
		t.Fatalf("sign in %s: %v", user, err)
	}
	id := IDToken(tok)
	if id == "" {
		t.Fatalf("sign in %s: no id_token in the token response", user)
	}
	return id
}

// IDToken is the id_token of a token response, or "".
func IDToken(tok *oauth2.Token) string {
	s, _ := tok.Extra("id_token").(string)
	return s
}

// CompleteDevice does the user's half of a device authorization: signs
// user in on the device page with userCode and allows the request.
func (p *Provider) CompleteDevice(ctx context.Context, userCode, user string) error {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	for _, step := range []struct {
		path string
		form url.Values
	}{
		{"/device/login", url.Values{"user_code": {userCode}, "username": {user}, "password": {Password}}},
		{"/device/confirm", url.Values{"action": {"allowed"}}},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+step.path, strings.NewReader(step.form.Encode()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("device %s: %w", step.path, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("device %s: %s: %s", step.path, resp.Status, body)
		}
		if step.path == "/device/confirm" && !strings.Contains(string(body), "allowed") {
			return fmt.Errorf("device confirm: unexpected page %q", body)
		}
	}
	return nil
}

// redirect sends one request and returns where the provider redirects.
func redirect(ctx context.Context, hc *http.Client, method, target string, form url.Values) (*url.URL, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s %s: %s, no redirect: %s", method, target, resp.Status, b)
	}
	return loc, nil
}

// deferred is a handler set once the server's URL is known.
type deferred struct {
	mu sync.RWMutex
	h  http.Handler
}

func (d *deferred) set(h http.Handler) { d.mu.Lock(); d.h = h; d.mu.Unlock() }
func (d *deferred) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.RLock()
	h := d.h
	d.mu.RUnlock()
	if h == nil {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// users is a storage.UserStore tests can add to.
type users struct {
	mu sync.Mutex
	m  map[string]*storage.User
}

func (u *users) add(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m[name] = &storage.User{ID: name, Username: name, Password: Password, Email: name + "@acme.test", EmailVerified: true}
}
func (u *users) GetUserByID(id string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.m[id]
}
func (u *users) GetUserByUsername(n string) *storage.User {
	return u.GetUserByID(n) // ID == username
}
func (u *users) ExampleClientID() string { return "service" }

// sigKey is a signing key: op.SigningKey.
type sigKey struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k *sigKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *sigKey) Key() any                                    { return k.priv }
func (k *sigKey) ID() string                                  { return k.id }

// pubKey is its published half: op.Key.
type pubKey struct{ *sigKey }

func (k pubKey) Algorithm() jose.SignatureAlgorithm { return k.alg }
func (k pubKey) Use() string                        { return "sig" }
func (k pubKey) Key() any                           { return k.priv.Public() }

func newKey(alg, kid string) (*sigKey, error) {
	switch alg {
	case "RS256":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		return &sigKey{id: kid, alg: jose.RS256, priv: k}, nil
	case "ES256":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		return &sigKey{id: kid, alg: jose.ES256, priv: k}, nil
	}
	return nil, fmt.Errorf("oidctest: algorithm %q: want RS256 or ES256", alg)
}

// idpStorage is the example storage with rotating keys, groups and extra
// claims. op asks SigningKey for every token it signs and KeySet for every
// JWKS request, so a rotation takes effect at once.
type idpStorage struct {
	*storage.Storage
	users   *users
	mu      sync.Mutex
	current *sigKey
	keys    []*sigKey // published
	all     []*sigKey // ever made
	fetches int
	groups  map[string][]string
	claims  map[string]map[string]any
}

func (s *idpStorage) rotate(k *sigKey, keepOld bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if keepOld {
		s.keys = append(s.keys, k)
	} else {
		s.keys = []*sigKey{k}
	}
	s.all = append(s.all, k)
	s.current = k
}

func (s *idpStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current, nil
}

func (s *idpStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256, jose.ES256}, nil
}

func (s *idpStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches++
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, pubKey{k})
	}
	return out, nil
}

func (s *idpStorage) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, tr op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, tr, scopes); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.groups[tr.GetSubject()]; ok {
		ui.AppendClaims("groups", slices.Clone(g))
	}
	for k, v := range s.claims[tr.GetSubject()] {
		ui.AppendClaims(k, v)
	}
	return nil
}

func (s *idpStorage) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{"groups": slices.Clone(s.groups[userID])}, nil
}

func (s *idpStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil || id != ClientID {
		return c, err
	}
	return cliClient{c}, nil
}

// cliClient is the public native client with the device grant too.
// CreateAccessAndRefreshTokens gives a device-grant token the client id
// the example storage leaves out (its getInfoFromRequest knows only the
// code and refresh requests), without which the refresh token it issues
// is refused for the wrong client.
func (s *idpStorage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	switch req.(type) {
	case *storage.AuthRequest, *storage.RefreshTokenRequest, op.TokenExchangeRequest:
	default:
		req = &storage.AuthRequest{ApplicationID: ClientID, UserID: req.GetSubject(), Scopes: req.GetScopes()}
	}
	return s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
}

type cliClient struct{ op.Client }

func (cliClient) GrantTypes() []zoidc.GrantType {
	return []zoidc.GrantType{zoidc.GrantTypeCode, zoidc.GrantTypeRefreshToken, zoidc.GrantTypeDeviceCode}
}
