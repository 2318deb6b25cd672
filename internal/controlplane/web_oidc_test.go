package controlplane

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/oidctest"
	"github.com/tollgate-dev/tollgate/internal/web"
)

// webOIDC serves the inbox of an OpenID-signed control plane: people sign
// in at the provider (authorization code + PKCE), no dev picker.
func webOIDC(t *testing.T, e *env, p *oidctest.Provider) *site {
	t.Helper()
	d, err := identity.Discover(t.Context(), nil, p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	return webOn(t, e, func(c *web.Config) {
		c.DevUsers = nil
		c.OIDC = &web.OIDC{Issuer: p.Issuer, AuthURL: d.AuthURL, TokenURL: d.TokenURL, ClientID: oidctest.ClientID, Verifier: e.srv.cfg.Verifier}
	})
}

// signInAt signs user in through the provider's login form, as a browser
// follows the redirects, and returns where the inbox sent it at the end.
func (b *browser) signInAt(p *oidctest.Provider, user string) string {
	b.t.Helper()
	code, loc := b.get("/signin/start?return=/runs")
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, p.Issuer) {
		b.t.Fatalf("sign-in start: %d %s", code, loc)
	}
	u, err := url.Parse(loc)
	if err != nil {
		b.t.Fatal(err)
	}
	if u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("nonce") == "" || u.Query().Get("state") == "" {
		b.t.Fatalf("the authorization request lacks PKCE, a nonce or a state: %s", loc)
	}
	// The provider's authorize endpoint sends the browser to its login page.
	for range 5 {
		code, loc = b.get(loc)
		if code != http.StatusSeeOther && code != http.StatusFound {
			break
		}
		if strings.Contains(loc, "/login/username") {
			break
		}
	}
	lu, err := url.Parse(loc)
	if err != nil || lu.Query().Get("authRequestID") == "" {
		b.t.Fatalf("the provider's login page: %d %s", code, loc)
	}
	code, loc = b.do(http.MethodPost, p.Issuer+"/login/username", url.Values{"id": {lu.Query().Get("authRequestID")}, "username": {user}, "password": {oidctest.Password}}, nil)
	for range 5 {
		if !strings.HasPrefix(loc, p.Issuer) {
			break
		}
		code, loc = b.get(loc)
	}
	if !strings.Contains(loc, "/signin/callback") {
		b.t.Fatalf("the provider did not send the browser back: %d %s", code, loc)
	}
	code, loc = b.get(loc)
	if code != http.StatusSeeOther {
		b.t.Fatalf("the callback: %d\n%s", code, b.last)
	}
	return loc
}

// People sign in to the inbox at the OpenID provider: the code flow with
// PKCE, a state and a nonce, the ID token verified as the API verifies one;
// the provider's groups decide what they may decide, as in the API; a
// callback that is not this browser's sign-in is refused.
func TestWebSignInThroughTheProvider(t *testing.T) {
	e, p := oidcEnv(t)
	p.SetGroups("dave", "finance-emea")
	s := webOIDC(t, e, p)
	if code, page := s.browser().get("/signin"); code != 200 || !strings.Contains(page, `id="signin-oidc"`) || strings.Contains(page, "/signin/dev") {
		t.Fatalf("the sign-in page: %d\n%s", code, page)
	}
	resp, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).StartRun(t.Context(), &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	ask := resp.GetRun().GetId() + "/ask_1"
	dave := s.browser()
	if back := dave.signInAt(p, "dave"); back != "/runs" {
		t.Fatalf("after signing in the inbox sent dave to %q, want where he was going", back)
	}
	_, page := dave.get("/")
	if !strings.Contains(page, "finance-emea") || !strings.Contains(page, ask) {
		t.Fatalf("dave's inbox after signing in: no group or no ask\n%s", page)
	}
	_, page = dave.get("/asks/" + ask)
	if !strings.Contains(page, `id="approve-1"`) {
		t.Fatalf("dave, in finance-emea, may not approve:\n%s", text(page, "why-not"))
	}
	// Out of the group at the provider: his next sign-in may not.
	p.SetGroups("dave")
	dave2 := s.browser()
	dave2.signInAt(p, "dave")
	_, page = dave2.get("/asks/" + ask)
	if strings.Contains(page, `id="approve-1"`) || !strings.Contains(text(page, "why-not"), "100000") {
		t.Fatalf("dave, out of the group, sees: %q", text(page, "why-not"))
	}
	if code, _ := dave2.post("/asks/"+ask, approveForm(page)); code != http.StatusForbidden {
		t.Fatalf("dave out of the group approving: %d\n%s", code, text(dave2.last, "error"))
	}
	// A callback this browser did not start, or with another state.
	mallory := s.browser()
	if code, page := mallory.get("/signin/callback?code=x&state=y"); code != http.StatusBadRequest || !strings.Contains(text(page, "message"), "not started here") {
		t.Fatalf("a callback with no sign-in: %d %q", code, text(page, "message"))
	}
	code, loc := mallory.get("/signin/start")
	if code != http.StatusSeeOther {
		t.Fatal(code)
	}
	u, _ := url.Parse(loc)
	if code, page := mallory.get("/signin/callback?code=x&state=" + u.Query().Get("state") + "x"); code != http.StatusBadRequest || !strings.Contains(text(page, "message"), "state does not match") {
		t.Fatalf("a callback with another state: %d %q", code, text(page, "message"))
	}
	// No dev picker behind an OpenID provider.
	if code, _ := mallory.post("/signin/dev", url.Values{"user": {"dave"}}); code != http.StatusForbidden {
		t.Fatalf("the dev picker with a provider: %d", code)
	}
}
