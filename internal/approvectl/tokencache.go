package approvectl

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/oauth2"

	"github.com/tollgate-dev/tollgate/internal/identity"
)

// The token cache keeps what approvectl login got from the OpenID provider,
// one file per server: <config dir>/tollgate/tokens/<sha256(server)>.json.
// The directory is 0700 and every file 0600, written whole (a temp file
// renamed over the old one), so a crash never leaves half a token and no
// other user can read it. A file others may read or write is refused, not
// used: its token may have been seen, or planted.

// refreshWithin is how close to its expiry a cached ID token is refreshed
// before a call: a call that starts with a minute left must not fail
// half-way on the server's clock.
const refreshWithin = time.Minute

// oidcTimeout bounds each call to the OpenID provider (discovery, token,
// refresh): a provider that hangs must not hang approvectl.
const oidcTimeout = 30 * time.Second

// cachedToken is one server's cache entry.
type cachedToken struct {
	Server       string    `json:"server"`
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"client_id"`
	IDToken      string    `json:"id_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry"` // the ID token's exp: the bearer's, not the access token's
}

type tokenCache struct{ dir string }

// tokenCache is the cache under the configured directory (Config.ConfigDir,
// else os.UserConfigDir).
func (g *globals) tokenCache() (tokenCache, error) {
	dir := g.cfg.ConfigDir
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return tokenCache{}, fmt.Errorf("no config directory for the token cache (set $XDG_CONFIG_HOME or $HOME): %w", err)
		}
		dir = d
	}
	return tokenCache{dir: filepath.Join(dir, "tollgate", "tokens")}, nil
}

// path is the file of server's entry; the name hashes the address so any
// address (ports, IPv6 brackets) makes a safe file name.
func (c tokenCache) path(server string) string {
	sum := sha256.Sum256([]byte(server))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:16])+".json")
}

// errNoCachedToken says the cache has no entry for the server.
var errNoCachedToken = errors.New("no cached token")

// load reads server's entry. A missing file is errNoCachedToken; a file
// that is not a regular file, or that group or others may read or write,
// is refused with the reason and what to do.
func (c tokenCache) load(server string) (*cachedToken, error) {
	p := c.path(server)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoCachedToken
	}
	if err != nil {
		return nil, fmt.Errorf("token cache %s: %w", p, err)
	}
	defer f.Close()
	st, err := f.Stat() // the opened file's mode, not a name someone may swap
	if err != nil {
		return nil, fmt.Errorf("token cache %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("token cache %s is not a regular file: remove it and run approvectl login again", p)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token cache %s has mode %04o: other users may read or change it, so it is not used; remove it (approvectl logout) and run approvectl login again", p, perm)
	}
	if err := ownedByMe(st); err != nil {
		return nil, fmt.Errorf("token cache %s: %w, so it is not used; remove it (approvectl logout) and run approvectl login again", p, err)
	}
	// A directory others may write lets them put their own file in place
	// of this one (between reads, or before the first).
	if dst, err := os.Stat(c.dir); err == nil && dst.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("token cache directory %s has mode %04o: other users may replace the tokens in it, so none is used; chmod 700 %s, then run approvectl login again", c.dir, dst.Mode().Perm(), c.dir)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("token cache %s: %w", p, err)
	}
	var t cachedToken
	if err := json.Unmarshal(b, &t); err != nil || t.IDToken == "" {
		return nil, fmt.Errorf("token cache %s is not a token approvectl wrote (%v): remove it (approvectl logout) and run approvectl login again", p, err)
	}
	if t.Server != server {
		return nil, fmt.Errorf("token cache %s holds the token of %s, not %s: remove it (approvectl logout) and run approvectl login again", p, t.Server, server)
	}
	return &t, nil
}

// store writes t as its server's entry: a temp file in the same directory,
// 0600, synced, then renamed over the old entry.
func (c tokenCache) store(t *cachedToken) (err error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, ".token-*")
	if err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	if _, err = f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	if err = os.Rename(f.Name(), c.path(t.Server)); err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	return nil
}

// lock takes the cache's lock file (flock), waiting at most oidcTimeout
// for another approvectl to finish its refresh; unlock releases it.
func (c tokenCache) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("token cache: %w", err)
	}
	p := filepath.Join(c.dir, ".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("token cache lock: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, oidcTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("token cache lock %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("token cache lock %s: another approvectl holds it (refreshing the token?): %w", p, ctx.Err())
		case <-tick.C:
		}
	}
}

// remove deletes server's entry; it reports whether there was one.
func (c tokenCache) remove(server string) (bool, error) {
	err := os.Remove(c.path(server))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("token cache: %w", err)
	}
	return true, nil
}

// cachedBearer is the ID token cached for server, refreshed first (and
// the cache rewritten) when it expires within refreshWithin. A refresh
// that fails says to run approvectl login again.
func (g *globals) cachedBearer(ctx context.Context, server string) (string, error) {
	c, err := g.tokenCache()
	if err != nil {
		return "", err
	}
	t, err := c.load(server)
	if err != nil {
		return "", err
	}
	now := g.cfg.Now()
	if now.Add(refreshWithin).Before(t.Expiry) {
		return t.IDToken, nil
	}
	// One refresh at a time per cache: the provider rotates the refresh
	// token, so a second approvectl refreshing with the old one would be
	// refused. Under the lock, an entry another process refreshed
	// meanwhile is used as it is.
	unlock, err := c.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if t, err = c.load(server); err != nil {
		return "", err
	}
	if now.Add(refreshWithin).Before(t.Expiry) {
		return t.IDToken, nil
	}
	if t.RefreshToken == "" {
		return "", fmt.Errorf("the token for %s expired at %s and cannot be refreshed: run approvectl login again", server, t.Expiry.Format(time.RFC3339))
	}
	if err := g.refresh(ctx, t); err != nil {
		return "", fmt.Errorf("the token for %s expired at %s and refreshing it at %s failed: %w; run approvectl login again", server, t.Expiry.Format(time.RFC3339), t.Issuer, err)
	}
	if err := c.store(t); err != nil {
		return "", err
	}
	return t.IDToken, nil
}

// refresh trades t's refresh token for a new ID token (and the refresh
// token the provider rotates to), updating t.
func (g *globals) refresh(ctx context.Context, t *cachedToken) error {
	ctx, hc := oidcContext(ctx)
	p, err := discover(ctx, hc, t.Issuer)
	if err != nil {
		return err
	}
	cfg := p.config(t.ClientID, "")
	// An expiry in the past makes the token source refresh at once; the
	// access token's own expiry is not what approvectl tracks.
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: t.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return oauthErr(err)
	}
	cl, raw, err := g.checkIDToken(tok, t.Issuer, t.ClientID)
	if err != nil {
		return err
	}
	t.IDToken, t.Expiry = raw, cl.expiry()
	if tok.RefreshToken != "" {
		t.RefreshToken = tok.RefreshToken
	}
	return nil
}

// oidcContext gives the oauth2 calls an HTTP client with a timeout.
func oidcContext(ctx context.Context) (context.Context, *http.Client) {
	hc := &http.Client{Timeout: oidcTimeout}
	return context.WithValue(ctx, oauth2.HTTPClient, hc), hc
}

// provider is what discovery says of an issuer.
type provider identity.Discovery

// discover reads issuer's OpenID configuration (identity.Discover): the
// issuer it names must be the one asked for, exactly.
func discover(ctx context.Context, hc *http.Client, issuer string) (*provider, error) {
	d, err := identity.Discover(ctx, hc, issuer)
	var mismatch *identity.IssuerMismatchError
	switch {
	case errors.As(err, &mismatch):
		return nil, fmt.Errorf("OpenID discovery at %s: %w: pass --issuer %s exactly", issuer, err, mismatch.Named)
	case err != nil:
		return nil, fmt.Errorf("OpenID discovery at %s: %w: is --issuer the provider's issuer URL?", issuer, err)
	case d.TokenURL == "":
		return nil, fmt.Errorf("OpenID discovery at %s names no token_endpoint", issuer)
	}
	p := provider(d)
	return &p, nil
}

// config is the OAuth 2.0 client of approvectl at p: a public client (no
// secret), so its id goes in the form, not in Basic auth.
func (p *provider) config(clientID, redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:    clientID,
		RedirectURL: redirect,
		Scopes:      []string{"openid", "profile", "email", "offline_access"},
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthURL, TokenURL: p.TokenURL, DeviceAuthURL: p.DeviceAuthURL,
			AuthStyle: oauth2.AuthStyleInParams},
	}
}

// oauthErr says what a provider's refusal means.
func oauthErr(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return err
	}
	desc := re.ErrorDescription
	if desc != "" {
		desc = " (" + desc + ")"
	}
	switch re.ErrorCode {
	case "access_denied":
		return fmt.Errorf("the sign-in was refused at the provider: access_denied%s", desc)
	case "expired_token":
		return fmt.Errorf("the code expired before the sign-in was finished: expired_token%s", desc)
	case "invalid_grant":
		return fmt.Errorf("the provider no longer accepts this grant: invalid_grant%s", desc)
	case "":
		return fmt.Errorf("the provider answered %s", re.Response.Status)
	}
	return fmt.Errorf("the provider refused: %s%s", re.ErrorCode, desc)
}

// claims are what a bearer token says of its holder, as approvectl shows
// them. They are read without checking the signature: the server checks
// it; approvectl only shows and compares.
type claims struct {
	Issuer   string          `json:"iss"`
	Subject  string          `json:"sub"`
	Audience json.RawMessage `json:"aud"`
	Exp      int64           `json:"exp"`
	Email    string          `json:"email"`
	Name     string          `json:"name"`
	Groups   json.RawMessage `json:"groups"`
}

func (c *claims) expiry() time.Time {
	if c.Exp == 0 {
		return time.Time{}
	}
	return time.Unix(c.Exp, 0)
}

// audience is aud as a list (a string or an array of strings).
func (c *claims) audience() []string { return stringOrList(c.Audience) }

// groups is the groups claim as a list (a string or an array of strings).
func (c *claims) groups() []string { return stringOrList(c.Groups) }

func stringOrList(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil
		}
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	return many
}

// parseClaims reads the payload of a compact JWT.
func parseClaims(token string) (*claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT (want three dot-separated parts)")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("not a JWT: payload: %w", err)
	}
	var c claims
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("not a JWT: payload: %w", err)
	}
	return &c, nil
}

// checkIDToken takes the ID token from a token response and checks that
// it is for this client from this issuer and not expired: the token came
// straight from the provider's token endpoint (OpenID Connect Core
// §3.1.3.7 lets a client skip the signature then); the server verifies
// the signature on every call.
func (g *globals) checkIDToken(tok *oauth2.Token, issuer, clientID string) (*claims, string, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, "", errors.New("the provider sent no ID token (is the openid scope allowed for this client?)")
	}
	cl, err := parseClaims(raw)
	if err != nil {
		return nil, "", fmt.Errorf("the provider's ID token: %w", err)
	}
	if cl.Issuer != issuer {
		return nil, "", fmt.Errorf("the provider's ID token is from the issuer %q, not %q", cl.Issuer, issuer)
	}
	aud := cl.audience()
	found := false
	for _, a := range aud {
		found = found || a == clientID
	}
	if !found {
		return nil, "", fmt.Errorf("the provider's ID token is for %q, not the client %q: check --client-id", aud, clientID)
	}
	if cl.Subject == "" {
		return nil, "", errors.New("the provider's ID token names no subject (sub)")
	}
	if !cl.expiry().After(g.cfg.Now()) {
		return nil, "", fmt.Errorf("the provider's ID token expired at %s already: check this machine's clock", cl.expiry().Format(time.RFC3339))
	}
	return cl, raw, nil
}

// ownedByMe refuses a file another user owns: it may hold their token, put
// there for this user to send as their own.
func ownedByMe(st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // not a Unix file system: the mode check is what there is
	}
	if uid := os.Getuid(); uid >= 0 && int(sys.Uid) != uid {
		return fmt.Errorf("it belongs to uid %d, not to you (uid %d)", sys.Uid, uid)
	}
	return nil
}
