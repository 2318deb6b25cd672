package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/web"
)

// webSetup is what the web inbox is built from, besides the options.
type webSetup struct {
	Site     *web.Site
	Server   *Server
	Verifier *identity.Verifier
	People   *identity.OIDCVerifier // the OpenID provider's, whose endpoints sign people in; nil: none
	DevUsers []string               // --dev: the picker's users
	Mount    map[string]http.Handler
	Log      *slog.Logger
}

// webCaller is how the inbox's calls carry their person: authenticated by
// the inbox's session, through the web surface (and a link, if any).
func webCaller(ctx context.Context, p identity.Principal, link string) context.Context {
	return api.As(ctx, p, api.Via{Surface: api.SurfaceWeb, Link: link})
}

// webSite listens for the web inbox and makes its Site (address and keys),
// which notices link to (nil when --web-listen is not given). The caller
// owns the listener; newWeb builds the inbox served on it.
func webSite(o *Options, apiTLS *tls.Config) (*web.Site, net.Listener, error) {
	if o.WebListen == "" {
		return nil, nil, nil
	}
	if o.Dev && !identity.Loopback(o.WebListen) {
		return nil, nil, fmt.Errorf("--dev serves the web inbox on loopback only; %s is not", o.WebListen)
	}
	if o.WebURL == "" && !identity.Loopback(o.WebListen) {
		return nil, nil, fmt.Errorf("--web-listen %s is off loopback: give --web-url, the https address browsers reach it at", o.WebListen)
	}
	if u, err := url.Parse(o.WebURL); err == nil && u.Scheme == "http" && apiTLS == nil && !identity.Loopback(o.WebListen) {
		// A loopback http --web-url passes web.NewSite's check, but the
		// listener would serve sessions and links in the clear to the
		// network: insecure modes bind loopback only.
		return nil, nil, fmt.Errorf("--web-listen %s is off loopback and serves plain http (--web-url %s, no --tls-cert): listen on loopback, or serve TLS here or at a proxy and give its https address as --web-url", o.WebListen, o.WebURL)
	}
	key, err := webKey(o)
	if err != nil {
		return nil, nil, err
	}
	lis, err := net.Listen("tcp", o.WebListen)
	if err != nil {
		return nil, nil, fmt.Errorf("web listen: %w", err)
	}
	base := o.WebURL
	if base == "" {
		scheme := "http"
		if apiTLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + lis.Addr().String()
	}
	site, err := web.NewSite(key, base, o.WebLinkTTL, nil)
	if err != nil {
		lis.Close()
		return nil, nil, fmt.Errorf("--web-url: %w", err)
	}
	if apiTLS != nil {
		lis = tls.NewListener(lis, apiTLS)
	}
	return site, lis, nil
}

// newWeb builds the web inbox of site (nil without one).
func newWeb(ctx context.Context, o *Options, ws webSetup) (*web.Handler, error) {
	if ws.Site == nil {
		return nil, nil
	}
	var oidc *web.OIDC
	if ws.People != nil {
		d := ws.People.Discovery()
		secret := ""
		if o.WebClientSecret != "" {
			b, err := os.ReadFile(o.WebClientSecret)
			if err != nil {
				return nil, fmt.Errorf("--web-oidc-client-secret-file: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		oidc = &web.OIDC{Issuer: o.OIDCIssuer, AuthURL: d.AuthURL, TokenURL: d.TokenURL, ClientID: o.OIDCClientID, ClientSecret: secret, Verifier: ws.Verifier}
	}
	var dev []string
	if o.Dev {
		dev = ws.DevUsers
	}
	return web.New(web.Config{API: ws.Server.Local(), Caller: webCaller, Site: ws.Site, OIDC: oidc, DevUsers: dev, DevIssuer: o.Issuer,
		LinkSignsIn: o.WebLinkSignsIn, SessionTTL: o.WebSessionTTL, Mount: ws.Mount, Log: ws.Log})
}

// webKey reads --web-key; --dev makes one in its folder the first time.
func webKey(o *Options) ([]byte, error) {
	path := o.WebKey
	if path == "" && o.Dev {
		path = filepath.Join(o.Home, "dev", "web.key")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(path, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
				return nil, fmt.Errorf("make the dev web key: %w", err)
			}
		}
	}
	if path == "" {
		return nil, errors.New("--web-listen needs --web-key FILE: at least 32 random bytes that seal sessions and sign links, the same file on every replica (e.g. head -c 48 /dev/urandom | base64 > web.key)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--web-key: %w", err)
	}
	// Anyone may not read it; a group may (Kubernetes mounts a Secret
	// group-readable for the pod's fsGroup).
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o007 != 0 && !o.Dev {
		return nil, fmt.Errorf("--web-key %s can be read by anyone (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) < web.MinKeyBytes {
		return nil, fmt.Errorf("--web-key %s holds %d bytes; at least %d random bytes are needed", path, len(b), web.MinKeyBytes)
	}
	return b, nil
}
