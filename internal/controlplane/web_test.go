package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/web"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// site is the web inbox over a test control plane, served on loopback.
type site struct {
	t   *testing.T
	h   *web.Handler
	url string
}

var devPickerUsers = []string{"alice", "bob", "carol", "dave", "audrey", "otto", "mallory"}

// webOn serves the web inbox of e's control plane, signing in through
// the dev picker unless edits configure otherwise.
func webOn(t *testing.T, e *env, edits ...func(*web.Config)) *site {
	t.Helper()
	return webOnTTL(t, e, 0, edits...)
}

// webOnTTL is webOn with links good for linkTTL.
func webOnTTL(t *testing.T, e *env, linkTTL time.Duration, edits ...func(*web.Config)) *site {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	base := "http://" + ts.Listener.Addr().String()
	ws, err := web.NewSite([]byte(strings.Repeat("k", 40)), base, linkTTL, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := web.Config{API: e.srv.Local(), Caller: webCaller, Site: ws, DevUsers: devPickerUsers, DevIssuer: testIssuer}
	for _, ed := range edits {
		ed(&cfg)
	}
	h, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = h
	ts.Start()
	t.Cleanup(ts.Close)
	return &site{t: t, h: h, url: base}
}

// browser is one person's browser: cookies kept, redirects not followed.
type browser struct {
	t    *testing.T
	s    *site
	c    *http.Client
	last string // the last page's body
}

func (s *site) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: s.t, s: s, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// get fetches path (or a full URL) and returns its status and body.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	return b.do(http.MethodGet, path, nil, nil)
}

func (b *browser) do(method, path string, form url.Values, header http.Header) (int, string) {
	b.t.Helper()
	target := path
	if strings.HasPrefix(path, "/") {
		target = b.s.url + path
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp.StatusCode, resp.Header.Get("Location")
	}
	b.last = string(out)
	return resp.StatusCode, string(out)
}

// post submits form to path with the CSRF token of the last page.
func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	if form.Get("csrf") == "" {
		form.Set("csrf", field(b.last, "csrf"))
	}
	return b.do(http.MethodPost, path, form, nil)
}

// signIn picks user on the dev sign-in page.
func (b *browser) signIn(user string) {
	b.t.Helper()
	b.get("/signin")
	if code, loc := b.post("/signin/dev", url.Values{"user": {user}, "return": {"/"}}); code != http.StatusSeeOther || loc != "/" {
		b.t.Fatalf("dev sign-in as %s: %d %s", user, code, loc)
	}
}

var inputRe = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// field is the value of the first hidden input named name on page.
func field(page, name string) string {
	for _, m := range inputRe.FindAllStringSubmatch(page, -1) {
		if m[1] == name && m[2] != "" {
			return html.UnescapeString(m[2])
		}
	}
	return ""
}

// text is an element's text by id, tags dropped and entities decoded.
func text(page, id string) string {
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], ">")
	end := strings.Index(page[i+j:], "</p>")
	if end < 0 {
		end = min(len(page[i+j:]), 2000)
	}
	return html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(page[i+j+1:i+j+end], ""))
}

// approveForm is the page's approval, as its form would post it.
func approveForm(page string) url.Values {
	return url.Values{"decision": {"approve"}, "option": {"1"}, "payload_digest": {field(page, "payload_digest")}, "evidence_digest": {field(page, "evidence_digest")}}
}

func parkedVendorPayment(t *testing.T, e *env) string {
	t.Helper()
	r := e.start("alice", "vendor-payment")
	e.settle()
	return r.GetId() + "/ask_1"
}

// dave approves vendor-payment from the web: the decision goes through the
// API's one path (authority now, the digests on the page), the payment
// runs once, and the journal records it as from approvectl, with the
// surface it came through.
func TestWebApproveIsTheAPIsDecision(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	ask := parkedVendorPayment(t, e)
	dave := s.browser()
	dave.signIn("dave")
	if code, page := dave.get("/"); code != 200 || !strings.Contains(page, ask) || !strings.Contains(page, "role finance-1m") || !strings.Contains(page, "on expiry the run ends rejected") {
		t.Fatalf("dave's inbox: %d\n%s", code, page)
	}
	code, page := dave.get("/asks/" + ask)
	if code != 200 || !strings.Contains(page, `id="approve-1"`) || !strings.Contains(page, "485000") || !strings.Contains(page, "XXXX2048") {
		t.Fatalf("dave's packet: %d\n%s", code, page)
	}
	if code, loc := dave.post("/asks/"+ask, approveForm(page)); code != http.StatusSeeOther || !strings.Contains(loc, "done=approve") {
		t.Fatalf("dave approving: %d %s\n%s", code, loc, dave.last)
	}
	e.settle()
	run := strings.Split(ask, "/")[0]
	if n := e.exec.calls(run + "/pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
	_, page = dave.get("/asks/" + ask + "?done=approve")
	if done := text(page, "done"); !strings.Contains(done, "approve by dave") {
		t.Fatalf("the page after approving says %q", done)
	}
	a, err := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if err != nil {
		t.Fatal(err)
	}
	d := a.GetAsk().GetDecisions()
	if len(d) != 1 || d[0].GetActor() != "dave" || d[0].GetVia() != "web" || d[0].GetAuthority() == "" {
		t.Fatalf("decisions: %v", d)
	}
	recs, err := e.store.Journal(context.Background(), run, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if r.Actor == "dave" && strings.Contains(string(r.Payload), `"via":"web"`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no journal record of dave's decision names the web surface")
	}
	assertAuditClean(t, e, run)
}

// alice started the run: her page says why she may not decide it and
// offers no form that would; a decision she forges anyway is refused by
// the API's authority check and changes nothing. bob sees his limit.
func TestWebShowsWhyNot(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	ask := parkedVendorPayment(t, e)
	for who, why := range map[string]string{"alice": "separation of duties", "bob": "100000"} {
		b := s.browser()
		b.signIn(who)
		code, page := b.get("/asks/" + ask)
		if code != 200 {
			t.Fatalf("%s's packet: %d\n%s", who, code, page)
		}
		if got := text(page, "why-not"); !strings.Contains(got, why) {
			t.Errorf("%s's page says why not: %q, want it to mention %q", who, got, why)
		}
		if strings.Contains(page, `name="decision"`) {
			t.Errorf("%s's page offers a decision form:\n%s", who, page)
		}
		// Forged from the layout's token (the sign-out form's).
		code, page = b.post("/asks/"+ask, url.Values{"decision": {"approve"}, "option": {"1"}, "payload_digest": {"x"}})
		if code != http.StatusForbidden && code != http.StatusConflict {
			t.Errorf("%s's forged approval: %d", who, code)
		}
		_ = page
	}
	a, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if len(a.GetAsk().GetDecisions()) != 0 || a.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
		t.Fatalf("after refused decisions the ask is %s with %v", a.GetAsk().GetState(), a.GetAsk().GetDecisions())
	}
}

// A GET of a decision's URL never decides, a POST without the session's
// CSRF token (or with another session's, or from another site) is
// refused, and nothing changes.
func TestWebStateChangesNeedAPostFromItsOwnPage(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	ask := parkedVendorPayment(t, e)
	dave, bob := s.browser(), s.browser()
	dave.signIn("dave")
	bob.signIn("bob")
	_, page := dave.get("/asks/" + ask)
	form := approveForm(page)
	q := form.Encode()
	if code, _ := dave.get("/asks/" + ask + "?" + q); code != 200 {
		t.Fatalf("GET with a decision's fields: %d", code)
	}
	_, bobPage := bob.get("/")
	cases := map[string]struct {
		csrf   string
		header http.Header
	}{
		"no token":          {"", nil},
		"a made-up token":   {"AAAA", nil},
		"another's token":   {field(bobPage, "csrf"), nil},
		"from another site": {field(page, "csrf"), http.Header{"Origin": {"https://evil.example"}}},
		"cross-site fetch":  {field(page, "csrf"), http.Header{"Sec-Fetch-Site": {"cross-site"}}},
	}
	for name, c := range cases {
		f := approveForm(page)
		if c.csrf != "" {
			f.Set("csrf", c.csrf)
		}
		code, body := dave.do(http.MethodPost, "/asks/"+ask, f, c.header)
		if code != http.StatusForbidden || !strings.Contains(body, "nothing was decided") {
			t.Errorf("%s: %d, want 403 saying nothing was decided", name, code)
		}
	}
	a, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if len(a.GetAsk().GetDecisions()) != 0 {
		t.Fatalf("decided: %v", a.GetAsk().GetDecisions())
	}
	// The same form with its own page's token decides.
	if code, _ := dave.post("/asks/"+ask, form); code != http.StatusSeeOther {
		t.Fatalf("the page's own form: %d\n%s", code, dave.last)
	}
}

// An amendment through the form changes the payload and the digest the
// page shows; an approval of the digest shown before is refused.
func TestWebAmendChangesTheDigest(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	ask := parkedVendorPayment(t, e)
	dave := s.browser()
	dave.signIn("dave")
	_, before := dave.get("/asks/" + ask)
	old := field(before, "payload_digest")
	if code, loc := dave.post("/asks/"+ask, url.Values{"decision": {"amend"}, "field": {"amount"}, "value": {"90000"}, "payload_digest": {old}}); code != http.StatusSeeOther {
		t.Fatalf("amend: %d %s\n%s", code, loc, dave.last)
	}
	_, after := dave.get("/asks/" + ask)
	now := field(after, "payload_digest")
	if now == old || !strings.Contains(text(after, "payload-digest"), now) || !strings.Contains(after, "90000") {
		t.Fatalf("after amending, the digest is %s (was %s)", now, old)
	}
	if !strings.Contains(text(after, "title"), "90000") {
		t.Errorf("the title after amending: %q", text(after, "title"))
	}
	stale := approveForm(before)
	stale.Set("csrf", field(after, "csrf"))
	if code, page := dave.post("/asks/"+ask, stale); code != http.StatusConflict || !strings.Contains(text(page, "error"), now) {
		t.Fatalf("approving the old digest: %d %q", code, text(page, "error"))
	}
}

// A notice's link: bound to one ask and one person; opening it decides
// nothing (a scanner that follows it changes nothing); the holder signs in
// as its person; a decision through it uses it up, on any replica (the
// ask records it), and a second use is refused and says so.
func TestWebLinksOpenAndDecideOnce(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	r := e.start("alice", "vendor-payment")
	e.settle()
	ask := r.GetId() + "/ask_1"
	link, err := s.h.PersonLink(ask, "dave", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	scanner := s.browser()
	for range 3 {
		if code, loc := scanner.get(link); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
			t.Fatalf("a link opened with no session: %d %s", code, loc)
		}
	}
	bob := s.browser()
	bob.signIn("bob")
	if code, page := bob.get(link); code != http.StatusForbidden || !strings.Contains(text(page, "message"), "for dave") {
		t.Fatalf("bob opening dave's link: %d %q", code, text(page, "message"))
	}
	dave := s.browser()
	dave.signIn("dave")
	code, page := dave.get(link)
	if code != 200 || !strings.Contains(text(page, "link-note"), "dave") {
		t.Fatalf("dave opening his link: %d\n%s", code, page)
	}
	a, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if len(a.GetAsk().GetDecisions()) != 0 {
		t.Fatalf("opening the link decided: %v", a.GetAsk().GetDecisions())
	}
	path := strings.TrimPrefix(link, s.url)
	// An amendment leaves the ask open: the link is used up all the same.
	if code, _ := dave.post(path, url.Values{"decision": {"amend"}, "field": {"amount"}, "value": {"90000"}}); code != http.StatusSeeOther {
		t.Fatalf("amend through the link: %d\n%s", code, dave.last)
	}
	_, page = dave.get(link)
	if got := text(page, "link-used"); !strings.Contains(got, "dave already used this link") {
		t.Fatalf("the used link's page says %q", got)
	}
	if strings.Contains(page, `name="decision"`) {
		t.Fatalf("a used link's page offers decisions")
	}
	code, page = dave.post(path, approveForm(page))
	if code != http.StatusConflict || !strings.Contains(text(page, "error"), "already used") {
		t.Fatalf("a second use: %d %q", code, text(page, "error"))
	}
	a, _ = e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	d := a.GetAsk().GetDecisions()
	if len(d) != 1 || !strings.HasPrefix(d[0].GetVia(), "web link lnk_") || a.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
		t.Fatalf("after two uses of one link: %s %v", a.GetAsk().GetState(), d)
	}
	// From the inbox, not the link, dave still decides.
	_, page = dave.get("/asks/" + ask)
	if code, _ := dave.post("/asks/"+ask, approveForm(page)); code != http.StatusSeeOther {
		t.Fatalf("approving from the inbox after the link was used: %d\n%s", code, dave.last)
	}
	// Tampered and expired links say so.
	if code, page := dave.get(link[:len(link)-3] + "xyz"); code != http.StatusGone || !strings.Contains(text(page, "message"), "not valid") {
		t.Errorf("a tampered link: %d %q", code, text(page, "message"))
	}
	past := webOnTTL(t, e, time.Nanosecond)
	old, _ := past.h.PersonLink(ask, "dave", time.Now().Add(time.Hour))
	if code, page := past.browser().get(old); code != http.StatusGone || !strings.Contains(text(page, "message"), "expired") {
		t.Errorf("an expired link: %d %q", code, text(page, "message"))
	}
}

// Where links sign in (one-click approval from email), the link alone
// shows its person the packet and lets them decide once — that ask only.
func TestWebLinkThatSignsIn(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e, func(c *web.Config) { c.LinkSignsIn = true })
	ask := parkedVendorPayment(t, e)
	other := parkedVendorPayment(t, e)
	link, _ := s.h.PersonLink(ask, "dave", time.Now().Add(time.Hour))
	b := s.browser()
	code, page := b.get(link)
	if code != 200 || !strings.Contains(page, `id="approve-1"`) {
		t.Fatalf("the link alone: %d\n%s", code, page)
	}
	if code, loc := b.get("/asks/" + other); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
		t.Fatalf("the link's holder reading another ask: %d %s", code, loc)
	}
	path := strings.TrimPrefix(link, s.url)
	if code, _ := b.post(path, approveForm(page)); code != http.StatusSeeOther {
		t.Fatalf("approving through the link: %d\n%s", code, b.last)
	}
	e.settle()
	a, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if d := a.GetAsk().GetDecisions(); len(d) != 1 || d[0].GetActor() != "dave" || !strings.HasPrefix(d[0].GetVia(), "web link") {
		t.Fatalf("decisions: %v", d)
	}
}

// A new ask appears in a watching inbox without a reload: the page's
// event stream says the inbox changed once it has synced.
func TestWebInboxIsLive(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	dave := s.browser()
	dave.signIn("dave")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/events", nil)
	resp, err := dave.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	next := func(want string) string {
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), want) {
				return sc.Text()
			}
		}
		t.Fatalf("the stream ended before %q: %v", want, sc.Err())
		return ""
	}
	next("event: synced")
	ask := parkedVendorPayment(t, e)
	next("event: inbox")
	if data := next("data:"); !strings.Contains(data, `"kind":"added"`) || !strings.Contains(data, ask) {
		t.Fatalf("the change: %s", data)
	}
	if code, list := dave.get("/inbox/list"); code != 200 || !strings.Contains(list, ask) {
		t.Fatalf("the list the page fetches: %d\n%s", code, list)
	}
}

// assertAuditClean runs the invariant queries over the run.
func assertAuditClean(t *testing.T, e *env, run string) {
	t.Helper()
	resp, err := e.audit("audrey").CheckInvariants(context.Background(), &tollgatev1.CheckInvariantsRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	if v := resp.GetViolations(); len(v) > 0 || len(resp.GetQueries()) == 0 {
		t.Errorf("audit of %s: %d queries, violations %v", run, len(resp.GetQueries()), v)
	}
}

// A notice of an ask that asks a role carries a link for each person
// policy finds able to decide it — not for the requester separation of
// duties keeps out, nor for someone over their limit — and the ask's
// address; each link opens the ask for its person only.
func TestNoticeLinksForEveryDecider(t *testing.T) {
	got := make(chan webhook.Event, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env webhook.Envelope
		if err := json.NewDecoder(r.Body).Decode(&env); err == nil {
			got <- env.Event
		}
	}))
	defer recv.Close()
	hooks, err := webhook.New(webhook.Config{BaseBackoff: time.Millisecond}, []webhook.Endpoint{{Name: "all", URL: recv.URL, Secret: []byte(strings.Repeat("s", 32)), Roles: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	u := newUnstartedWeb(t)
	ws, err := web.NewSite([]byte(strings.Repeat("k", 40)), u.base, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, nil, devPolicy(t), echoTools(), func(c *Config) { c.Notifier = notices{hooks: hooks, site: ws, personLinks: true} })
	s := u.serve(t, e, ws)
	ask := parkedVendorPayment(t, e)
	var ev webhook.Event
	for ev.Kind != webhook.KindOpened {
		select {
		case ev = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("no opened notice")
		}
	}
	if ev.Payload["ask_url"] != ws.AskURL(ask) {
		t.Errorf("ask_url %v, want %s", ev.Payload["ask_url"], ws.AskURL(ask))
	}
	links, _ := ev.Payload["links"].(map[string]any)
	if _, ok := links["dave"]; !ok {
		t.Fatalf("no link for dave, who may decide it: %v", ev.Payload)
	}
	for _, never := range []string{"alice", "bob", "mallory"} {
		if _, ok := links[never]; ok {
			t.Errorf("a link for %s, who may not decide it", never)
		}
	}
	dave, bob := s.browser(), s.browser()
	dave.signIn("dave")
	bob.signIn("bob")
	if code, page := dave.get(links["dave"].(string)); code != 200 || !strings.Contains(text(page, "link-note"), "dave") {
		t.Fatalf("dave's link: %d", code)
	}
	if code, _ := bob.get(links["dave"].(string)); code != http.StatusForbidden {
		t.Fatalf("dave's link opened by bob: %d", code)
	}
}

// unstartedWeb is a listener for a web inbox whose address must be known
// before the control plane is built (its notices link to it).
type unstartedWeb struct {
	ts   *httptest.Server
	base string
}

func newUnstartedWeb(t *testing.T) *unstartedWeb {
	ts := httptest.NewUnstartedServer(nil)
	t.Cleanup(ts.Close)
	return &unstartedWeb{ts: ts, base: "http://" + ts.Listener.Addr().String()}
}

// serve starts the inbox of e's control plane on it.
func (u *unstartedWeb) serve(t *testing.T, e *env, ws *web.Site) *site {
	t.Helper()
	h, err := web.New(web.Config{API: e.srv.Local(), Caller: webCaller, Site: ws, DevUsers: devPickerUsers, DevIssuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	u.ts.Config.Handler = h
	u.ts.Start()
	return &site{t: t, h: h, url: u.base}
}

// A start that fails after the web inbox began listening gives its port
// back: an operator's typo (here Slack flags without a token) must not
// leave the address taken for the retry.
func TestRunGivesTheWebPortBackWhenTheStartFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = Run(context.Background(), []string{"--dev", "--home", t.TempDir(), "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0",
		"--web-listen", addr, "--slack-channel", "C0123"}, MainConfig{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "slack-token-file") {
		t.Fatalf("Run: %v, want the missing token refused", err)
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the web port %s is still taken after the failed start: %v", addr, err)
	}
	again.Close()
}
