package approvectl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// watchWriter is a Stdout another goroutine may read while Run writes:
// waitFor returns the first match of re once it has been written.
type watchWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newWatchWriter() *watchWriter { return &watchWriter{changed: make(chan struct{}, 1)} }

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *watchWriter) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if m := re.FindStringSubmatch(w.String()); m != nil {
			return m
		}
		select {
		case <-w.changed:
		case <-deadline:
			t.Fatalf("%v never written; got:\n%s", re, w.String())
		}
	}
}

// bearerPlane is a control plane that records the bearer of each call.
type bearerPlane struct {
	fakePlane
	mu      sync.Mutex
	bearers []string
}

func (p *bearerPlane) record(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p.mu.Lock()
	p.bearers = append(p.bearers, strings.Join(md.Get("authorization"), ","))
	p.mu.Unlock()
	return h(ctx, req)
}

// WhoAmI answers as a control plane would for dave.
func (p *bearerPlane) WhoAmI(context.Context, *tollgatev1.WhoAmIRequest) (*tollgatev1.WhoAmIResponse, error) {
	return &tollgatev1.WhoAmIResponse{Subject: "dave", Kind: "person", Issuer: "idp", Groups: []string{"finance-emea"}, Roles: []string{"finance-1m", "member"}, Domain: "acme"}, nil
}

func (p *bearerPlane) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bearers) == 0 {
		return ""
	}
	return p.bearers[len(p.bearers)-1]
}

func startBearerPlane(t *testing.T) (*bearerPlane, string) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &bearerPlane{}
	srv := grpc.NewServer(grpc.UnaryInterceptor(p.record))
	tollgatev1.RegisterApprovalServiceServer(srv, p)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return p, lis.Addr().String()
}

// loginEnv runs approvectl with a config directory of its own and no
// environment.
type loginEnv struct {
	t         *testing.T
	configDir string
	now       func() time.Time
	open      func(string) error
}

func newLoginEnv(t *testing.T) *loginEnv {
	return &loginEnv{t: t, configDir: t.TempDir(), now: time.Now}
}

func (e *loginEnv) cfg(stdout io.Writer, stderr io.Writer) Config {
	return Config{Stdout: stdout, Stderr: stderr, Getenv: func(string) string { return "" }, Now: e.now, Terminal: func(io.Writer) bool { return false },
		ConfigDir: e.configDir, OpenBrowser: e.open}
}

func (e *loginEnv) run(args ...string) (stdout, stderr string, code int) {
	var o, s bytes.Buffer
	err := Run(context.Background(), args, e.cfg(&o, &s))
	return o.String(), s.String(), ExitCode(err)
}

func (e *loginEnv) cacheFile(server string) string {
	return tokenCache{dir: filepath.Join(e.configDir, "tollgate", "tokens")}.path(server)
}

func (e *loginEnv) cached(server string) cachedToken {
	e.t.Helper()
	b, err := os.ReadFile(e.cacheFile(server))
	if err != nil {
		e.t.Fatal(err)
	}
	var c cachedToken
	if err := json.Unmarshal(b, &c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func noFollow(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// The device flow against a real provider: login prints the address and
// the code, the test signs dave in over HTTP as a person would in a
// browser, login caches the ID token (0600 in a 0700 directory), calls
// carry it as the bearer, whoami shows dave and his groups, a token near
// expiry is refreshed (and the cache rewritten) before a call, a failed
// refresh says to log in again, and logout removes the entry.
func TestLoginDeviceFlowCacheRefreshLogout(t *testing.T) {
	issuer := startIdP(t)
	plane, server := startBearerPlane(t)
	e := newLoginEnv(t)

	out := newWatchWriter()
	var errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), []string{"login", "--issuer", issuer, "--server", server}, e.cfg(out, &errOut))
	}()
	m := out.waitFor(t, regexp.MustCompile(`open (\S+) and enter the code (\S+)\n`))
	if m[1] != issuer+"/device" {
		t.Errorf("verification URI %q, want %s/device", m[1], issuer)
	}
	// The complete URI is the next line: wait for it as for the first (it
	// may not be written yet when the first is seen).
	if c := out.waitFor(t, regexp.MustCompile(`\(or open (\S+), which has the code in it\)\n`)); !strings.Contains(c[1], "user_code="+m[2]) {
		t.Errorf("the complete verification URI %q does not hold the code %s", c[1], m[2])
	}
	jar, _ := cookiejar.New(nil)
	hc := noFollow(jar)
	resp, err := hc.PostForm(issuer+"/device/login", url.Values{"user_code": {m[2]}, "username": {"dave"}, "password": {"pw"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = hc.PostForm(issuer+"/device/confirm", url.Values{"action": {"allowed"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("device confirm: %s", resp.Status)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("login: %v\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("login did not finish 30 s after the user step")
	}
	if !strings.Contains(out.String(), "Signed in to "+server+" as dave") {
		t.Errorf("login does not say who signed in:\n%s", out.String())
	}

	path := e.cacheFile(server)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no cache file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode %04o, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode %04o, want 0700", dst.Mode().Perm())
	}
	first := e.cached(server)
	cl, err := parseClaims(first.IDToken)
	if err != nil || cl.Subject != "dave" || cl.Issuer != issuer || first.RefreshToken == "" || first.Issuer != issuer || first.ClientID != DefaultClientID {
		t.Fatalf("cache holds %+v (claims %+v, %v)", first, cl, err)
	}

	// a call sends the cached ID token
	if _, stderr, code := e.run("asks", "--server", server); code != 0 {
		t.Fatalf("asks with the cached token: exit %d: %s", code, stderr)
	}
	if got := plane.last(); got != "Bearer "+first.IDToken {
		t.Errorf("bearer sent %.30q…, want the cached ID token", got)
	}

	stdout, stderr, code := e.run("whoami", "--server", server, "-o", "json")
	var who whoamiResult
	if code != 0 || json.Unmarshal([]byte(stdout), &who) != nil {
		t.Fatalf("whoami: exit %d %s %s", code, stdout, stderr)
	}
	if who.Subject != "dave" || fmt.Sprint(who.Groups) != "[finance-emea]" || who.Issuer != issuer || who.Server != server || who.Source != "cache "+path || who.Expired {
		t.Errorf("whoami says %+v", who)
	}
	if v := who.Seen; v == nil || v.Subject != "dave" || fmt.Sprint(v.Roles) != "[finance-1m member]" || v.Domain != "acme" {
		t.Errorf("whoami's server view: %+v", who.Seen)
	}
	if got := plane.last(); got != "Bearer "+first.IDToken {
		t.Errorf("whoami asked the server with %.30q…, want the cached ID token", got)
	}
	stdout, _, _ = e.run("whoami", "--server", server)
	for _, want := range []string{"subject  dave", "groups   finance-emea", "issuer   " + issuer, "token    cache " + path} {
		if !strings.Contains(stdout, want) {
			t.Errorf("whoami text lacks %q:\n%s", want, stdout)
		}
	}

	// 30 s before the ID token expires: refreshed before the call
	e.now = func() time.Time { return first.Expiry.Add(-30 * time.Second) }
	if _, stderr, code := e.run("asks", "--server", server); code != 0 {
		t.Fatalf("asks near expiry: exit %d: %s", code, stderr)
	}
	second := e.cached(server)
	if second.IDToken == first.IDToken || second.RefreshToken == first.RefreshToken || second.RefreshToken == "" {
		t.Fatalf("cache not rewritten by the refresh: id token same %v, refresh token same %v", second.IDToken == first.IDToken, second.RefreshToken == first.RefreshToken)
	}
	if got := plane.last(); got != "Bearer "+second.IDToken {
		t.Errorf("bearer after the refresh is not the new ID token")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("rewritten cache file mode %04o", st.Mode().Perm())
	}

	// approvectl run in parallel near expiry: one refresh, the others use
	// its result (the provider rotates the refresh token, so a second
	// refresh with the old one would be refused)
	e.now = func() time.Time { return second.Expiry.Add(-30 * time.Second) }
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, stderr, code := e.run("asks", "--server", server)
			if code != 0 {
				t.Errorf("parallel call %d near expiry: exit %d: %s", i, code, stderr)
			}
		})
	}
	wg.Wait()
	if third := e.cached(server); third.IDToken == second.IDToken {
		t.Errorf("the parallel calls did not refresh")
	}
	second = e.cached(server)

	// a refresh the provider refuses says to log in again
	bad := second
	bad.RefreshToken = "not-a-refresh-token"
	c, _ := (&globals{cfg: e.cfg(io.Discard, io.Discard)}).tokenCache()
	if err := c.store(&bad); err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return second.Expiry.Add(time.Minute) }
	_, stderr, code = e.run("asks", "--server", server)
	if code != ExitRefused || !strings.Contains(stderr, "run approvectl login again") || !strings.Contains(stderr, "refreshing it at "+issuer+" failed") {
		t.Errorf("a failed refresh: exit %d, stderr %s", code, stderr)
	}

	stdout, _, code = e.run("logout", "--server", server)
	if code != 0 || !strings.Contains(stdout, "Signed out of "+server) {
		t.Errorf("logout: exit %d %s", code, stdout)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cache file still there after logout: %v", err)
	}
	stdout, _, code = e.run("logout", "--server", server)
	if code != 0 || !strings.Contains(stdout, "Not signed in to "+server) {
		t.Errorf("second logout: exit %d %s", code, stdout)
	}
	_, stderr, code = e.run("asks", "--server", server)
	if code != ExitUsage || !strings.Contains(stderr, "approvectl login") {
		t.Errorf("a call after logout: exit %d %s", code, stderr)
	}
}

// The loopback redirect with PKCE: the sign-in address asks for an S256
// challenge and redirects to 127.0.0.1; an answer with another state is
// refused (and the login goes on); the real one completes the sign-in.
func TestLoginBrowserLoopbackPKCE(t *testing.T) {
	issuer := startIdP(t)
	e := newLoginEnv(t)
	server := "tollgate.test:443"
	var refused int
	e.open = func(authURL string) error {
		u, err := url.Parse(authURL)
		if err != nil {
			return err
		}
		q := u.Query()
		if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) < 43 || q.Get("state") == "" {
			t.Errorf("sign-in address without PKCE S256 and state: %s", authURL)
		}
		redirect, err := url.Parse(q.Get("redirect_uri"))
		if err != nil || redirect.Hostname() != "127.0.0.1" || redirect.Port() == "" || redirect.Path != "/callback" {
			t.Errorf("redirect_uri %q is not a loopback one", q.Get("redirect_uri"))
			return err
		}
		// another login's answer (login CSRF): refused
		resp, err := http.Get(redirect.String() + "?code=forged&state=" + url.QueryEscape(q.Get("state")+"x"))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "state mismatch") {
			t.Errorf("a wrong state: %s %s", resp.Status, body)
		} else {
			refused++
		}
		// the browser: the provider's login form, then redirects back to approvectl
		jar, _ := cookiejar.New(nil)
		hc := noFollow(jar)
		resp, err = hc.Get(authURL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		loc, err := resp.Location()
		if err != nil {
			return fmt.Errorf("authorize answered %s without a redirect: %w", resp.Status, err)
		}
		follow := &http.Client{Jar: jar, Timeout: 10 * time.Second}
		resp, err = follow.PostForm(issuer+"/login/username", url.Values{"id": {loc.Query().Get("authRequestID")}, "username": {"dave"}, "password": {"pw"}})
		if err != nil {
			return err
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Signed in") || resp.Request.URL.Host != redirect.Host {
			t.Errorf("the browser ended at %s with %s: %s", resp.Request.URL, resp.Status, body)
		}
		return nil
	}
	stdout, stderr, code := e.run("login", "--browser", "--issuer", issuer, "--server", server, "--timeout", "30s")
	if code != 0 {
		t.Fatalf("login --browser: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if refused != 1 || !strings.Contains(stderr, "state mismatch") {
		t.Errorf("the wrong state was not refused (refused %d, stderr %q)", refused, stderr)
	}
	if !strings.Contains(stdout, issuer+"/auth?") || !strings.Contains(stdout, "Signed in to "+server+" as dave") {
		t.Errorf("login --browser prints:\n%s", stdout)
	}
	c := e.cached(server)
	if cl, err := parseClaims(c.IDToken); err != nil || cl.Subject != "dave" || c.RefreshToken == "" {
		t.Errorf("cached after --browser: %+v %v", cl, err)
	}
}

// An issuer URL that is not the provider's exact issuer is refused with
// the one to use.
func TestLoginWrongIssuer(t *testing.T) {
	issuer := startIdP(t)
	e := newLoginEnv(t)
	_, stderr, code := e.run("login", "--issuer", issuer+"/", "--server", "tollgate.test:443")
	if code == 0 || !strings.Contains(stderr, fmt.Sprintf("calls itself %q, not %q", issuer, issuer+"/")) || !strings.Contains(stderr, "pass --issuer "+issuer) {
		t.Errorf("wrong issuer: exit %d: %s", code, stderr)
	}
	_, stderr, code = e.run("login", "--server", "tollgate.test:443")
	if code != ExitUsage || !strings.Contains(stderr, "--issuer") {
		t.Errorf("no issuer: exit %d: %s", code, stderr)
	}
}

// A cache file others may read is not used, and says why.
func TestTokenCacheRefusesAFileOthersCanRead(t *testing.T) {
	e := newLoginEnv(t)
	server := "tollgate.test:443"
	c := tokenCache{dir: filepath.Join(e.configDir, "tollgate", "tokens")}
	tok := "e30." + "eyJzdWIiOiJkYXZlIiwiZXhwIjo0MTAyNDQ0ODAwfQ" + ".sig" // {"sub":"dave","exp":4102444800}
	if err := c.store(&cachedToken{Server: server, Issuer: "https://idp.test", ClientID: "approvectl", IDToken: tok, Expiry: time.Unix(4102444800, 0)}); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := e.run("whoami", "--local", "--server", server); code != 0 || !strings.Contains(stdout, "subject  dave") {
		t.Fatalf("whoami with a 0600 cache: exit %d %s %s", code, stdout, stderr)
	}
	if err := os.Chmod(c.path(server), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := e.run("whoami", "--server", server)
	if code != ExitRefused || !strings.Contains(stderr, "has mode 0644: other users may read or change it, so it is not used") {
		t.Errorf("a 0644 cache: exit %d %s", code, stderr)
	}
	// another server's entry is not this one's
	if _, _, code := e.run("whoami", "--server", "other.test:443"); code != ExitUsage {
		t.Errorf("whoami for a server with no entry: exit %d, want %d", code, ExitUsage)
	}
	// A 0600 file in a directory others may write: they could have put it
	// there, or swap it next time.
	if err := os.Chmod(c.path(server), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(c.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = e.run("whoami", "--local", "--server", server)
	if code != ExitRefused || !strings.Contains(stderr, "other users may replace the tokens in it") {
		t.Errorf("a cache directory others may write: exit %d %s", code, stderr)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		// root may give the file away: then it is someone else's token.
		if err := os.Chown(c.path(server), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		_, stderr, code = e.run("whoami", "--local", "--server", server)
		if code != ExitRefused || !strings.Contains(stderr, "belongs to uid 65534, not to you") {
			t.Errorf("a cache file another user owns: exit %d %s", code, stderr)
		}
	}
}

// Ctrl-C while the device flow waits ends the login at once, and says so.
func TestLoginDeviceFlowCancelled(t *testing.T) {
	issuer := startIdP(t)
	e := newLoginEnv(t)
	out := newWatchWriter()
	var errOut bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"login", "--issuer", issuer, "--server", "tollgate.test:443"}, e.cfg(out, &errOut))
	}()
	out.waitFor(t, regexp.MustCompile(`Waiting for the sign-in`))
	cancel()
	select {
	case err := <-done:
		if ExitCode(err) != ExitInternal || !strings.Contains(errOut.String(), "login cancelled") {
			t.Errorf("cancelled login: exit %d, stderr %q", ExitCode(err), errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled login kept waiting")
	}
	if _, err := os.Stat(e.cacheFile("tollgate.test:443")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled login left a cache entry: %v", err)
	}
}

// The provider's refusal (access_denied on the redirect) ends the login
// with the provider's reason and caches nothing.
func TestLoginBrowserRefusedAtTheProvider(t *testing.T) {
	issuer := startIdP(t)
	e := newLoginEnv(t)
	e.open = func(authURL string) error {
		u, _ := url.Parse(authURL)
		q := u.Query()
		resp, err := http.Get(q.Get("redirect_uri") + "?error=access_denied&error_description=not+today&state=" + url.QueryEscape(q.Get("state")))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	_, stderr, code := e.run("login", "--browser", "--issuer", issuer, "--server", "tollgate.test:443", "--timeout", "30s")
	if code != ExitRefused || !strings.Contains(stderr, "the sign-in was refused at the provider: access_denied (not today)") {
		t.Errorf("refused at the provider: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(e.cacheFile("tollgate.test:443")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused login left a cache entry: %v", err)
	}
}

// Nobody finishing the sign-in within --timeout ends the login.
func TestLoginBrowserTimesOut(t *testing.T) {
	issuer := startIdP(t)
	e := newLoginEnv(t)
	e.open = func(string) error { return errors.New("no browser here") }
	_, stderr, code := e.run("login", "--browser", "--issuer", issuer, "--server", "tollgate.test:443", "--timeout", "300ms")
	if code != ExitRefused || !strings.Contains(stderr, "not finished within --timeout 300ms") || !strings.Contains(stderr, "could not open a browser (no browser here): open the address yourself") {
		t.Errorf("timed out: exit %d: %s", code, stderr)
	}
}

// The provider's refusals say what happened and what to do.
func TestOAuthErrorsSayWhatHappened(t *testing.T) {
	for code, want := range map[string]string{
		"access_denied":  "the sign-in was refused at the provider: access_denied (why)",
		"expired_token":  "the code expired before the sign-in was finished: expired_token (why)",
		"invalid_grant":  "the provider no longer accepts this grant: invalid_grant (why)",
		"invalid_client": "the provider refused: invalid_client (why)",
	} {
		err := oauthErr(fmt.Errorf("wrapped: %w", &oauth2.RetrieveError{ErrorCode: code, ErrorDescription: "why", Response: &http.Response{Status: "400 Bad Request"}}))
		if err.Error() != want {
			t.Errorf("%s: %q, want %q", code, err, want)
		}
	}
}
