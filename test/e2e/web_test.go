package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/browsertest"
	"github.com/tollgate-dev/tollgate/internal/oidctest"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// webRe finds the web inbox's address in the control plane's
// "msg=serving … web=ADDR" line (listenRe reads the other listeners).
var webRe = regexp.MustCompile(`msg=serving .*\bweb=("?)([^\s"]+)`)

// linkRecipe asks finance to pay a small amount, naming dave and bob as
// its approvers with a quorum of two: the notices of its ask name both,
// so each gets a single-use link, and one approval leaves it pending.
const linkRecipe = `ask finance:
  pay 5000 INR to vendor V-2?
  approvers: 2 of dave, bob
pay: payments.pay {"vendor": "V-2", "invoice": "I-2", "amount": 5000, "currency": "INR", "bank_account": "XXXX0002"}
`

// notices is a webhook receiver on loopback: it verifies each delivery
// with the shipped Verifier and keeps the envelopes.
type notices struct {
	srv     *httptest.Server
	mu      sync.Mutex
	envs    []webhook.Envelope
	arrived chan struct{} // closed, and replaced, on each delivery
}

func newNotices(t *testing.T, secret []byte) *notices {
	t.Helper()
	v := webhook.NewVerifier(secret)
	n := &notices{arrived: make(chan struct{})}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, env, err := v.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		n.mu.Lock()
		n.envs = append(n.envs, env)
		close(n.arrived)
		n.arrived = make(chan struct{})
		n.mu.Unlock()
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// wait returns the first delivery that pred accepts, waiting for it.
func (n *notices) wait(t *testing.T, what string, pred func(webhook.Envelope) bool) webhook.Envelope {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		n.mu.Lock()
		for _, e := range n.envs {
			if pred(e) {
				n.mu.Unlock()
				return e
			}
		}
		ch, got := n.arrived, len(n.envs)
		n.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no webhook notice %s among the %d received", what, got)
		}
	}
}

// webAsk is an ask as the API gives it to audrey (an auditor).
func webAsk(t *testing.T, c *cluster, id string) *tollgatev1.Ask {
	t.Helper()
	resp, err := tollgatev1.NewApprovalServiceClient(c.api("audrey")).GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: id})
	if err != nil {
		t.Fatalf("GetAsk %s: %v", id, err)
	}
	return resp.GetAsk()
}

// webShow is `approvectl --as audrey asks show ID -o json`.
type webShow struct {
	State         string `json:"state"`
	Title         string `json:"title"`
	PayloadDigest string `json:"payload_digest"`
	Decisions     []struct {
		Kind   string `json:"kind"`
		Actor  string `json:"actor"`
		Option string `json:"option_id"`
		Via    string `json:"via"`
	} `json:"decisions"`
}

func showAsk(t *testing.T, c *cluster, id string) webShow {
	t.Helper()
	var s webShow
	c.plane.ctl(t, "", "--as", "audrey", "asks", "show", id, "-o", "json").json(t, &s)
	return s
}

// signIn signs user in, in the tab ctx, through the OpenID provider's own
// login page, as a person does: the inbox sends them to sign in, the
// button takes them to the provider, they type their name and password,
// and they land on the inbox.
func signIn(t *testing.T, ctx context.Context, base string, idp *oidctest.Provider, user string) {
	t.Helper()
	if code := browsertest.Navigate(t, ctx, base+"/"); code != http.StatusOK || !strings.HasPrefix(browsertest.Location(t, ctx), base+"/signin?return=") {
		t.Fatalf("%s: the inbox without a session: %d at %s, want the sign-in page", user, code, browsertest.Location(t, ctx))
	}
	if code := browsertest.ClickAndWait(t, ctx, "#signin-oidc"); code != http.StatusOK || !strings.HasPrefix(browsertest.Location(t, ctx), idp.Issuer+"/login/username") {
		t.Fatalf("%s: #signin-oidc: %d at %s, want the provider's login page", user, code, browsertest.Location(t, ctx))
	}
	browsertest.SendKeys(t, ctx, "#username", user)
	browsertest.SendKeys(t, ctx, "#password", oidctest.Password)
	if code := browsertest.ClickAndWait(t, ctx, "button[type=submit]"); code != http.StatusOK || browsertest.Location(t, ctx) != base+"/" {
		t.Fatalf("%s: after the provider's login: %d at %s, want the inbox", user, code, browsertest.Location(t, ctx))
	}
	if who := browsertest.Text(t, ctx, "#who"); who != user {
		t.Fatalf("signed in as %q, want %q", who, user)
	}
}

// withT makes c report to t (a subtest) until t ends.
func withT(c *cluster, t *testing.T) {
	old := c.t
	c.t = t
	t.Cleanup(func() { c.t = old })
}

// effects is the payment stand-in's log of side effects, a line each.
func effects(t *testing.T, c *cluster) []string {
	t.Helper()
	b, err := os.ReadFile(c.effects)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// formFieldsJS reads the fields a form's button would post, the button's
// own name and value included.
const formFieldsJS = `(sel => {
	const b = document.querySelector(sel);
	const out = {};
	for (const [k, v] of new FormData(b.form)) out[k] = v;
	if (b.name) out[b.name] = b.value;
	return out;
})`

// postFormJS builds a form with fields and posts it to action, as a
// copy of a page's form submitted again would be.
const postFormJS = `((action, fields) => {
	const f = document.createElement("form");
	f.method = "post";
	f.action = action;
	for (const [k, v] of Object.entries(fields)) {
		const i = document.createElement("input");
		i.type = "hidden"; i.name = k; i.value = v;
		f.appendChild(i);
	}
	document.body.appendChild(f);
	f.submit();
})`

func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, browsertest.DefaultTimeout)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v\n%s", js, err, browsertest.PageState(ctx))
	}
	return v
}

// The web inbox end to end, in Chromium: a real control plane on Redis
// with an executor and the payment stand-ins, a real OpenID provider whose
// login page people sign in on, approvectl starting the runs, and a
// webhook receiver getting the notices and their links. One cluster and
// one browser serve every subtest; each person has a tab of their own (a
// cookie jar of their own).
func TestWebInboxInChromium(t *testing.T) {
	t.Parallel()
	if _, err := browsertest.ChromiumPath(); err != nil && os.Getenv("CI") != "true" {
		t.Skip(err) // before building a cluster for nothing (Start skips too)
	}
	begin := time.Now()
	idp := oidctest.Start(t)
	dir := t.TempDir()
	secret := []byte("a-webhook-secret-of-32-bytes-or-so")
	hooks := newNotices(t, secret)
	secretFile := filepath.Join(dir, "hook.secret")
	webKey := filepath.Join(dir, "web.key")
	cfg := filepath.Join(dir, "controlplane.yaml")
	for path, body := range map[string][]byte{
		secretFile: secret,
		webKey:     []byte("0123456789abcdef0123456789abcdef0123456789abcdef"),
		cfg:        fmt.Appendf(nil, "webhooks:\n  - {name: w, url: %q, secret_file: %q, people: [dave], roles: [\"*\"]}\n", hooks.srv.URL+"/hook", secretFile),
	} {
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := newClusterSpec(t, clusterSpec{start: []string{"edge-1"}, planeArgs: []string{
		"--web-listen", "127.0.0.1:0", "--web-key", webKey, "--oidc-issuer", idp.Issuer, "--oidc-client-id", oidctest.ClientID, "--config", cfg}})
	m := webRe.FindStringSubmatch(c.plane.stderr.String())
	if m == nil {
		t.Fatalf("the control plane logged no web address:\n%s", c.plane.stderr)
	}
	base := "http://" + m[2]

	// Two vendor payments, parking while Chromium starts and people sign
	// in: run1 is approved by a click, run2 amended and approved from the
	// keyboard.
	start := func(recipe string) string {
		var r runOut
		c.plane.ctl(t, "", "--as", "alice", "run", recipe, "-o", "json").json(t, &r)
		return r.RunID
	}
	run1, run2 := start("vendor-payment"), start("vendor-payment")
	ask1, ask2 := run1+"/ask_1", run2+"/ask_1"

	b := browsertest.Start(t) // after the servers: it closes first
	tabs := map[string]context.Context{}
	for _, who := range []string{"dave", "alice", "bob"} {
		tabs[who] = b.NewTab(t)
	}
	dave := tabs["dave"]
	t.Logf("setup: %v (Chromium started in %v)", time.Since(begin).Round(time.Millisecond), b.StartDuration.Round(time.Millisecond))

	t.Run("SignInThroughTheProvider", func(t *testing.T) {
		for who, ctx := range tabs {
			signIn(t, ctx, base, idp, who)
		}
		ck, ok := browsertest.CookieNamed(t, dave, "tollgate_session")
		if !ok {
			t.Fatalf("no session cookie after signing in: %+v", browsertest.Cookies(t, dave))
		}
		// Secure is off on plain http over loopback, by design.
		if !ck.HTTPOnly || ck.SameSite != "Lax" || ck.Secure || ck.Path != "/" {
			t.Errorf("the session cookie: %+v, want HttpOnly, SameSite=Lax, path /", ck)
		}
		if sc, ok := browsertest.CookieNamed(t, dave, "tollgate_signin"); ok {
			t.Errorf("the sign-in's state cookie outlived the sign-in: %+v", sc)
		}
	})

	c.until(run1, "parked", func(r runOut) bool { return r.State == "parked" })
	c.until(run2, "parked", func(r runOut) bool { return r.State == "parked" })

	t.Run("WhyNot", func(t *testing.T) {
		for who, why := range map[string]string{"alice": "separation of duties", "bob": "100000"} {
			ctx := tabs[who]
			if code := browsertest.Navigate(t, ctx, base+"/asks/"+ask1); code != http.StatusOK {
				t.Fatalf("%s's packet: %d", who, code)
			}
			if got := browsertest.Text(t, ctx, "#why-not"); !strings.Contains(got, why) {
				t.Errorf("%s's #why-not: %q, want it to mention %q", who, got, why)
			}
			if n := browsertest.Count(t, ctx, "button[name=option]"); n != 0 {
				t.Errorf("%s's page has %d approve buttons", who, n)
			}
			if n := browsertest.Count(t, ctx, `form input[name=decision]`); n != 0 {
				t.Errorf("%s's page has %d decision forms", who, n)
			}
		}
	})

	t.Run("CSRFAndGETNeverDecide", func(t *testing.T) {
		withT(c, t)
		if code := browsertest.Navigate(t, dave, base+"/asks/"+ask1); code != http.StatusOK {
			t.Fatalf("dave's packet: %d", code)
		}
		// Every field the approval would post, as query parameters of a GET.
		q := url.Values{}
		for k, v := range evalJS[map[string]string](t, dave, formFieldsJS+`("#approve-1")`) {
			q.Set(k, v)
		}
		if q.Get("csrf") == "" || q.Get("decision") != "approve" || q.Get("option") != "1" {
			t.Fatalf("the approve form's fields: %v", q)
		}
		for _, u := range []string{base + "/asks/" + ask1 + "?" + q.Encode(), base + "/asks/" + ask1 + "?decision=approve&option=1"} {
			if code := browsertest.Navigate(t, dave, u); code != http.StatusOK {
				t.Fatalf("GET %s: %d", u, code)
			}
		}
		if n := browsertest.Count(t, dave, "#done"); n != 0 {
			t.Errorf("a GET says something was done: %q", browsertest.Text(t, dave, "#done"))
		}
		// The approve form without its CSRF token.
		if code := browsertest.Navigate(t, dave, base+"/asks/"+ask1); code != http.StatusOK {
			t.Fatalf("dave's packet: %d", code)
		}
		if n := evalJS[int](t, dave, `(() => { const i = document.querySelector("#approve-1").form.querySelector("input[name=csrf]"); i.remove(); return document.querySelector("#approve-1").form.querySelectorAll("input[name=csrf]").length; })()`); n != 0 {
			t.Fatalf("the csrf input is still there")
		}
		if code := browsertest.ClickAndWait(t, dave, "#approve-1"); code != http.StatusForbidden {
			t.Errorf("an approval without the CSRF token: %d, want 403", code)
		}
		if got := browsertest.Text(t, dave, "#error"); !strings.Contains(got, "nothing was decided") {
			t.Errorf("the refusal says %q", got)
		}
		a := webAsk(t, c, ask1)
		if a.GetState() != tollgatev1.AskState_ASK_STATE_PENDING || len(a.GetDecisions()) != 0 {
			t.Fatalf("after GETs and a POST without its token the ask is %s with %v", a.GetState(), a.GetDecisions())
		}
	})

	t.Run("Screenshots", func(t *testing.T) {
		out := os.Getenv("TOLLGATE_SCREENSHOTS")
		if out == "" {
			out = t.TempDir()
		}
		update := os.Getenv("TOLLGATE_UPDATE_SCREENSHOTS") == "1"
		// Both vendor payments wait in the inbox; the packet is dave's,
		// with his forms.
		shots := []struct{ path, ready, file, docs string }{
			{"/", `li[data-ask="` + ask1 + `"]`, "web-inbox.png", "../../docs/img/web-inbox.png"},
			{"/asks/" + ask2, "#approve-1", "web-packet.png", "../../docs/img/web-packet.png"},
		}
		for _, s := range shots {
			if code := browsertest.Navigate(t, dave, base+s.path); code != http.StatusOK {
				t.Fatalf("%s: %d", s.path, code)
			}
			browsertest.WaitVisible(t, dave, s.ready)
			if s.path == "/" && browsertest.Count(t, dave, `li[data-ask="`+ask2+`"]`) != 1 {
				t.Fatalf("%s is not in dave's inbox", ask2)
			}
			browsertest.Screenshot(t, dave, filepath.Join(out, s.file))
			if update {
				browsertest.Screenshot(t, dave, s.docs)
			}
		}
		t.Logf("screenshots in %s", out)
	})

	t.Run("ApproveFromThePacket", func(t *testing.T) {
		withT(c, t)
		if code := browsertest.Navigate(t, dave, base+"/asks/"+ask1); code != http.StatusOK {
			t.Fatalf("dave's packet: %d", code)
		}
		if got := browsertest.Text(t, dave, "#why-you"); got == "" {
			t.Errorf("dave's page does not say why he may decide")
		}
		if code := browsertest.ClickAndWait(t, dave, "#approve-1"); code != http.StatusOK {
			t.Fatalf("approving: %d", code)
		}
		if loc := browsertest.Location(t, dave); !strings.HasSuffix(loc, "/asks/"+ask1+"?done=approve") {
			t.Errorf("after approving the page is %s", loc)
		}
		if got := browsertest.Text(t, dave, "#done"); !strings.Contains(got, "approve by dave") {
			t.Errorf("#done says %q", got)
		}
		c.until(run1, "complete", func(r runOut) bool { return r.State == "complete" })
		if lines := effects(t, c); len(lines) != 1 || !strings.Contains(lines[0], `"amount":485000`) || !strings.Contains(lines[0], "XXXX2048") {
			t.Fatalf("pay ran once, as shown: %q", lines)
		}
		if s := showAsk(t, c, ask1); len(s.Decisions) != 1 || s.Decisions[0].Actor != "dave" || s.Decisions[0].Kind != "approve" || s.Decisions[0].Via != "web" {
			t.Fatalf("approvectl asks show -o json: %+v, want one approval by dave, via web", s)
		}
		auditClean(t, c.plane, "dave", run1)
	})

	t.Run("Accessibility", func(t *testing.T) {
		anon := b.NewTab(t)
		browsertest.Navigate(t, anon, base+"/")
		browsertest.WaitVisible(t, anon, "#signin-oidc")
		browsertest.RequireNoSeriousAxe(t, anon)

		pages := []struct {
			who, path, want string
			code            int
		}{
			{"dave", "/", "#inbox-list", 200},
			{"dave", "/asks/" + ask2, "#approve-1", 200},
			{"alice", "/asks/" + ask2, "#why-not", 200},
			{"dave", "/runs/" + run1, "#run-state", 200},
			{"dave", "/runs", "main table", 200},
			{"dave", "/asks/" + run1 + "/ask_9", "#message", 404},
		}
		for _, p := range pages {
			ctx := tabs[p.who]
			if code := browsertest.Navigate(t, ctx, base+p.path); code != p.code {
				t.Errorf("%s %s: %d, want %d", p.who, p.path, code, p.code)
			}
			browsertest.WaitVisible(t, ctx, p.want)
			browsertest.RequireNoSeriousAxe(t, ctx)
		}
	})

	t.Run("AmendThroughTheForm", func(t *testing.T) {
		if code := browsertest.Navigate(t, dave, base+"/asks/"+ask2); code != http.StatusOK {
			t.Fatalf("dave's packet: %d", code)
		}
		digest, title := browsertest.Text(t, dave, "#payload-digest"), browsertest.Text(t, dave, "#title")
		if !strings.Contains(title, "485000") {
			t.Fatalf("the title before amending: %q", title)
		}
		browsertest.SendKeys(t, dave, "#amend-amount", "400000")
		if code := browsertest.ClickAndWait(t, dave, "#amend-submit-amount"); code != http.StatusOK {
			t.Fatalf("amending: %d", code)
		}
		now := browsertest.Text(t, dave, "#payload-digest")
		if now == digest || !strings.HasPrefix(now, "sha256:") {
			t.Errorf("the digest after amending: %q (was %q)", now, digest)
		}
		if got := browsertest.Text(t, dave, "#title"); !strings.Contains(got, "400000") || strings.Contains(got, "485000") {
			t.Errorf("the title after amending: %q", got)
		}
		if v, _ := browsertest.Attr(t, dave, `#approve-1`, "id"); v == "" {
			t.Fatalf("no approve button after amending")
		}
		if got := evalJS[string](t, dave, `document.querySelector("#approve-1").form.querySelector("input[name=payload_digest]").value`); got != now {
			t.Errorf("the approve form quotes %q, the page shows %q", got, now)
		}
	})

	t.Run("KeyboardOnly", func(t *testing.T) {
		withT(c, t)
		if code := browsertest.Navigate(t, dave, base+"/asks/"+ask2); code != http.StatusOK {
			t.Fatalf("dave's packet: %d", code)
		}
		browsertest.Tab(t, dave, 1)
		if f := browsertest.FocusedElement(t, dave); f.Tag != "a" || f.Name != "Skip to content" {
			t.Fatalf("the first Tab focuses %+v, want the skip link", f)
		}
		// The skip link takes the focus past the header into the page.
		browsertest.PressEnter(t, dave)
		browsertest.Tab(t, dave, 1)
		if !evalJS[bool](t, dave, `document.querySelector("main").contains(document.activeElement) && document.activeElement !== document.querySelector("main")`) {
			t.Fatalf("after the skip link, Tab focuses %+v, outside the page's content", browsertest.FocusedElement(t, dave))
		}
		var path []string
		for i := 0; ; i++ {
			f := browsertest.FocusedElement(t, dave)
			if f.Name == "" || f.Tag == "body" {
				t.Errorf("Tab %d focuses %+v, with no accessible name", i, f)
			}
			path = append(path, fmt.Sprintf("%s %q", f.Role, f.Name))
			if f.ID == "approve-1" {
				if f.Role != "button" || !strings.HasPrefix(f.Name, "Approve") {
					t.Errorf("the approve button: %+v", f)
				}
				break
			}
			if i == 40 {
				t.Fatalf("40 Tabs never reached #approve-1: %v", path)
			}
			browsertest.Tab(t, dave, 1)
		}
		// Past it and back.
		browsertest.Tab(t, dave, 1)
		if got := browsertest.Focused(t, dave); got == "approve-1" {
			t.Fatalf("Tab stayed on the approve button")
		}
		browsertest.ShiftTab(t, dave, 1)
		if got := browsertest.Focused(t, dave); got != "approve-1" {
			t.Fatalf("Shift+Tab focuses %q, want approve-1", got)
		}
		t.Logf("focus order: %s", strings.Join(path, " → "))
		if code := browsertest.ExpectNavigation(t, dave, func() { browsertest.PressEnter(t, dave) }); code != http.StatusOK {
			t.Fatalf("Enter on the approve button: %d", code)
		}
		if got := browsertest.Text(t, dave, "#done"); !strings.Contains(got, "approve by dave") {
			t.Errorf("#done says %q", got)
		}
		c.until(run2, "complete", func(r runOut) bool { return r.State == "complete" })
		if lines := effects(t, c); len(lines) != 2 || !strings.Contains(lines[1], `"amount":400000`) {
			t.Fatalf("the amended payment ran once, for 400000: %q", lines)
		}
	})

	var run3 string
	t.Run("LiveInbox", func(t *testing.T) {
		withT(c, t)
		if code := browsertest.Navigate(t, dave, base+"/"); code != http.StatusOK {
			t.Fatalf("dave's inbox: %d", code)
		}
		browsertest.WaitVisible(t, dave, `body[data-live="synced"]`)
		evalJS[bool](t, dave, `window.notReloaded = true`)
		run3 = c.start(linkRecipe)
		// The entry names the run (the ask's id is in its link).
		browsertest.WaitText(t, dave, "#inbox-list", "run "+run3)
		browsertest.WaitText(t, dave, "#live", "New ask: pay 5000 INR to vendor V-2?")
		if !evalJS[bool](t, dave, `window.notReloaded === true`) {
			t.Fatalf("the inbox reloaded")
		}
		if n := browsertest.Count(t, dave, `#inbox-list li[data-ask="`+run3+`/ask_1"] a[href="/asks/`+run3+`/ask_1"]`); n != 1 {
			t.Errorf("the new ask's entry links to its packet %d times", n)
		}
		if v, _ := browsertest.Attr(t, dave, "#live", "aria-live"); v != "polite" {
			t.Errorf("#live is aria-live=%q", v)
		}
	})

	t.Run("SingleUseLink", func(t *testing.T) {
		if run3 == "" {
			t.Skip("LiveInbox started no run")
		}
		withT(c, t)
		ask3 := run3 + "/ask_1"
		env := hooks.wait(t, "opening "+ask3, func(e webhook.Envelope) bool {
			return e.Event.Kind == webhook.KindOpened && e.Event.AskID == ask3
		})
		var p struct {
			AskURL string            `json:"ask_url"`
			Links  map[string]string `json:"links"`
		}
		raw, _ := json.Marshal(env.Event.Payload)
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if p.AskURL != base+"/asks/"+ask3 {
			t.Errorf("ask_url %q, want %q", p.AskURL, base+"/asks/"+ask3)
		}
		link := p.Links["dave"]
		if !strings.HasPrefix(link, base+"/l/") || p.Links["bob"] == "" || p.Links["bob"] == link {
			t.Fatalf("the notice's links: %v", p.Links)
		}
		// A GET of the ask's URL, or of the link, with a decision's
		// parameters decides nothing.
		for _, u := range []string{p.AskURL + "?decision=approve&option=1", link + "?decision=approve&option=1"} {
			if code := browsertest.Navigate(t, dave, u); code != http.StatusOK {
				t.Fatalf("GET %s: %d", u, code)
			}
		}
		if a := webAsk(t, c, ask3); a.GetState() != tollgatev1.AskState_ASK_STATE_PENDING || len(a.GetDecisions()) != 0 {
			t.Fatalf("after GETs the ask is %s with %v", a.GetState(), a.GetDecisions())
		}

		if code := browsertest.Navigate(t, dave, link); code != http.StatusOK {
			t.Fatalf("dave opening his link: %d", code)
		}
		if got := browsertest.Text(t, dave, "#link-note"); !strings.Contains(got, "dave") || !strings.Contains(got, "single-use") {
			t.Errorf("#link-note says %q", got)
		}
		browsertest.RequireNoSeriousAxe(t, dave)
		fields := evalJS[map[string]string](t, dave, formFieldsJS+`("#approve-1")`)
		action := evalJS[string](t, dave, `document.querySelector("#approve-1").form.action`)
		if action != link {
			t.Errorf("the link page's form posts to %s, want the link", action)
		}
		if code := browsertest.ClickAndWait(t, dave, "#approve-1"); code != http.StatusOK {
			t.Fatalf("approving through the link: %d", code)
		}
		if got := browsertest.Text(t, dave, "#done"); !strings.Contains(got, "approve by dave") {
			t.Errorf("#done says %q", got)
		}
		if code := browsertest.Navigate(t, dave, link); code != http.StatusOK {
			t.Fatalf("dave opening his used link: %d", code)
		}
		if got := browsertest.Text(t, dave, "#link-used"); !strings.Contains(got, "dave already used this link") {
			t.Errorf("#link-used says %q", got)
		}
		if n := browsertest.Count(t, dave, "form input[name=decision], button[name=option]"); n != 0 {
			t.Errorf("the used link's page offers %d decision inputs", n)
		}
		// The same form, posted again.
		fj, _ := json.Marshal(fields)
		code := browsertest.ExpectNavigation(t, dave, func() {
			evalJS[chromedp.Void](t, dave, postFormJS+`(`+jsonString(link)+`, `+string(fj)+`)`)
		})
		if code != http.StatusConflict {
			t.Errorf("the link's form posted again: %d, want 409", code)
		}
		if got := browsertest.Text(t, dave, "#error"); !strings.Contains(got, "already used") {
			t.Errorf("the second use says %q", got)
		}
		if s := showAsk(t, c, ask3); s.State != "pending" || len(s.Decisions) != 1 || s.Decisions[0].Actor != "dave" || !strings.HasPrefix(s.Decisions[0].Via, "web link lnk_") {
			t.Fatalf("after two uses of one link, approvectl asks show -o json: %+v", s)
		}
		// From the inbox, not the link, dave's page still offers him his
		// part: he has approved, and may withdraw it.
		browsertest.Navigate(t, dave, p.AskURL)
		browsertest.WaitVisible(t, dave, "#revoke")
	})
	t.Logf("total: %v", time.Since(begin).Round(time.Millisecond))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
