package approvectl

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"
)

// DefaultClientID is the OAuth client approvectl signs in as unless
// --client-id says otherwise; the control plane's --oidc-client-id
// names the same client, since the ID token's aud is it.
const DefaultClientID = "approvectl"

// deviceWaitCap bounds the device flow when the provider gives the code
// no expiry (expires_in is required by RFC 8628, but a wait must end).
const deviceWaitCap = 30 * time.Minute

func newLoginCmd(g *globals) *cobra.Command {
	var issuer, clientID string
	var browser bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in through your company's OpenID provider and cache the token for this server",
		Long: `Sign in as yourself through an OpenID Connect provider (Okta, Entra ID, Google,
Keycloak, Dex, ...) and keep the token for the server chosen by --server /
$TOLLGATE_SERVER, so later verbs need no --token.

By default approvectl uses the device flow (RFC 8628): it prints a web address
and a short code; open the address on any device, sign in, enter the code.
approvectl waits (Ctrl-C stops it) and says when you are signed in.

With --browser it uses the loopback redirect (RFC 8252) with PKCE instead: it
listens on 127.0.0.1 for the provider's answer, prints the sign-in address and
opens it in your browser.

The token is cached in the user config directory (tollgate/tokens/, only you
may read it) with its refresh token; approvectl refreshes it before it
expires. A token given with --token, --as or $TOLLGATE_TOKEN is used before
the cache. approvectl whoami shows who the token says you are; approvectl
logout forgets it.`,
		Example: `  approvectl login --issuer https://login.acme.example --server tollgate.acme.example:443
  approvectl login --issuer https://acme.okta.com/oauth2/default --client-id 0oa1tollgate --browser
  TOLLGATE_SERVER=tollgate.acme.example:443 approvectl login --issuer https://dex.acme.example`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if issuer == "" {
				return usageErr("login needs --issuer URL: the OpenID provider's issuer (the server's --oidc-issuer)")
			}
			if clientID == "" {
				return usageErr("--client-id must not be empty")
			}
			if timeout <= 0 {
				return usageErr("--timeout must be positive, not %s", timeout)
			}
			return g.login(cmd.Context(), issuer, clientID, browser, timeout)
		},
	}
	cmd.Flags().StringVar(&issuer, "issuer", "", "the OpenID provider's issuer URL (the control plane's --oidc-issuer)")
	cmd.Flags().StringVar(&clientID, "client-id", DefaultClientID, "the OAuth client id approvectl signs in as (the control plane's --oidc-client-id)")
	cmd.Flags().BoolVar(&browser, "browser", false, "sign in through a browser on this machine (loopback redirect with PKCE) instead of the device flow")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the sign-in to be finished")
	return cmd
}

// loginResult is what login prints under -o json.
type loginResult struct {
	Server  string    `json:"server"`
	Issuer  string    `json:"issuer"`
	Subject string    `json:"subject"`
	Groups  []string  `json:"groups"`
	Expiry  time.Time `json:"expiry"`
	Cache   string    `json:"cache"`
}

func (g *globals) login(ctx context.Context, issuer, clientID string, browser bool, timeout time.Duration) error {
	server := g.serverAddr()
	cache, err := g.tokenCache()
	if err != nil {
		return &exitError{code: ExitInternal, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	octx, hc := oidcContext(ctx)
	p, err := discover(octx, hc, issuer)
	if err != nil {
		return &exitError{code: ExitInternal, err: err}
	}
	var tok *oauth2.Token
	if browser {
		tok, err = g.browserLogin(octx, p, clientID)
	} else {
		tok, err = g.deviceLogin(octx, p, clientID)
	}
	if err != nil {
		if ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &exitError{code: ExitRefused, err: fmt.Errorf("the sign-in was not finished within --timeout %s: run approvectl login again", timeout)}
			}
			return &exitError{code: ExitInternal, err: errors.New("login cancelled")}
		}
		return &exitError{code: ExitRefused, err: fmt.Errorf("login at %s: %w", issuer, err)}
	}
	cl, raw, err := g.checkIDToken(tok, issuer, clientID)
	if err != nil {
		return &exitError{code: ExitRefused, err: fmt.Errorf("login at %s: %w", issuer, err)}
	}
	entry := &cachedToken{Server: server, Issuer: issuer, ClientID: clientID, IDToken: raw, RefreshToken: tok.RefreshToken, Expiry: cl.expiry()}
	if err := cache.store(entry); err != nil {
		return &exitError{code: ExitInternal, err: err}
	}
	res := loginResult{Server: server, Issuer: issuer, Subject: cl.Subject, Groups: cl.groups(), Expiry: entry.Expiry, Cache: cache.path(server)}
	if res.Groups == nil {
		res.Groups = []string{}
	}
	if g.json() {
		return g.printJSON(res)
	}
	refresh := "no refresh token: run approvectl login again then"
	if entry.RefreshToken != "" {
		refresh = "refreshed before it expires"
	}
	fmt.Fprintf(g.cfg.Stdout, "Signed in to %s as %s (%s).\nToken cached in %s, valid until %s (%s).\n",
		server, cl.Subject, issuer, res.Cache, entry.Expiry.Local().Format("2006-01-02 15:04"), refresh)
	return nil
}

// deviceLogin runs the device authorization grant (RFC 8628): it prints
// where to sign in and the code, then polls the token endpoint at the
// interval the provider asks for until the person has finished, refused,
// or the code expired.
func (g *globals) deviceLogin(ctx context.Context, p *provider, clientID string) (*oauth2.Token, error) {
	if p.DeviceAuthURL == "" {
		return nil, errors.New("the provider offers no device flow (no device_authorization_endpoint): use --browser")
	}
	cfg := p.config(clientID, "")
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the device flow: %w", oauthErr(err))
	}
	w := g.cfg.Stdout
	if g.json() {
		w = g.cfg.Stderr // stdout carries only the JSON result
	}
	fmt.Fprintf(w, "To sign in, open %s and enter the code %s\n", da.VerificationURI, da.UserCode)
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(w, "  (or open %s, which has the code in it)\n", da.VerificationURIComplete)
	}
	fmt.Fprintf(w, "Waiting for the sign-in (Ctrl-C to stop)...\n")
	if da.Expiry.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deviceWaitCap)
		defer cancel()
	}
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) { // the poll ends at da.Expiry
			return nil, fmt.Errorf("the code %s expired at %s before the sign-in was finished: run approvectl login again", da.UserCode, da.Expiry.Local().Format("15:04:05"))
		}
		return nil, oauthErr(err)
	}
	return tok, nil
}

// loopbackPage is the one page the browser shows at the end.
var loopbackPage = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>approvectl login</title></head>
<body><main><h1>{{.Title}}</h1><p>{{.Text}}</p></main></body></html>
`))

func writePage(w http.ResponseWriter, code int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(code)
	_ = loopbackPage.Execute(w, struct{ Title, Text string }{title, text})
}

// browserLogin runs the authorization code flow with PKCE (S256) and a
// loopback redirect (RFC 8252 §7.3): a listener on 127.0.0.1 at a port the
// system picks takes the provider's redirect. The state is random and
// checked in constant time; a callback with another state is refused
// (it is not this login's) and the wait goes on.
func (g *globals) browserLogin(ctx context.Context, p *provider, clientID string) (*oauth2.Token, error) {
	if p.AuthURL == "" {
		return nil, errors.New("the provider offers no authorization endpoint: use the device flow (without --browser)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on 127.0.0.1 for the provider's answer: %w", err)
	}
	cfg := p.config(clientID, fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port))
	state, err := randomString()
	if err != nil {
		ln.Close()
		return nil, err
	}
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

	type answer struct {
		code string
		err  error
	}
	answers := make(chan answer, 1)
	refused := make(chan struct{}, 1) // a callback with another state; said on stderr by the waiting loop
	send := func(a answer) {
		select {
		case answers <- a:
		default: // one answer is enough; later ones change nothing
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			select {
			case refused <- struct{}{}:
			default:
			}
			writePage(w, http.StatusBadRequest, "Not this sign-in", "This answer does not belong to the sign-in approvectl started (state mismatch), so it was refused. Start again with approvectl login --browser.")
			return
		}
		if e := q.Get("error"); e != "" {
			desc := q.Get("error_description")
			writePage(w, http.StatusOK, "Sign-in failed", "The provider said: "+e+" "+desc+". You can close this tab.")
			send(answer{err: oauthErr(&oauth2.RetrieveError{ErrorCode: e, ErrorDescription: desc, Response: &http.Response{Status: e}})})
			return
		}
		code := q.Get("code")
		if code == "" {
			writePage(w, http.StatusBadRequest, "Sign-in failed", "The provider's answer has no code. Start again with approvectl login --browser.")
			send(answer{err: errors.New("the provider's answer has no code")})
			return
		}
		writePage(w, http.StatusOK, "Signed in", "approvectl has your sign-in. You can close this tab and go back to the terminal.")
		send(answer{code: code})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()

	w := g.cfg.Stdout
	if g.json() {
		w = g.cfg.Stderr
	}
	fmt.Fprintf(w, "To sign in, open this address in your browser (approvectl tries to open it):\n  %s\nWaiting for the sign-in (Ctrl-C to stop)...\n", authURL)
	open := g.cfg.OpenBrowser
	if open == nil {
		open = func(u string) error { return openBrowser(ctx, u) }
	}
	if err := open(authURL); err != nil {
		fmt.Fprintf(g.cfg.Stderr, "approvectl: could not open a browser (%v): open the address yourself\n", err)
	}
	sayRefused := func() {
		fmt.Fprintf(g.cfg.Stderr, "approvectl: refused a sign-in answer that is not this login's (state mismatch); still waiting\n")
	}
	var a answer
wait:
	for {
		select {
		case a = <-answers:
			select { // a refusal that came first is still said
			case <-refused:
				sayRefused()
			default:
			}
			break wait
		case <-refused:
			sayRefused()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if a.err != nil {
		return nil, a.err
	}
	tok, err := cfg.Exchange(ctx, a.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("exchanging the code: %w", oauthErr(err))
	}
	return tok, nil
}

func randomString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// openBrowser opens u with the platform's opener, no shell involved (u is
// one argument); it waits for the opener, which hands u to the browser
// and returns.
func openBrowser(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", u)
	case "windows":
		cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.CommandContext(ctx, "xdg-open", u)
	}
	return cmd.Run()
}
