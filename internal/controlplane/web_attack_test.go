package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/web"
)

// The tests here are the ones an attacker (or an unlucky operator) would
// write against the web inbox and its single-use links: each tries to
// make a surface do more than the guarantee it states.

// decisionsThrough counts the decisions recorded on ask (every round of
// it: the live ask and its stale records ask~N) made through link lnk.
func decisionsThrough(t *testing.T, e *env, run, lnk string) int {
	t.Helper()
	r := e.get("audrey", run)
	n := 0
	for _, a := range r.GetAsks() {
		got, err := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: a.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got.GetAsk().GetDecisions() {
			if strings.HasSuffix(d.GetVia(), " link "+lnk) {
				n++
			}
		}
	}
	return n
}

// linkID is the id a link's token carries (its body is signed, not
// sealed: anyone holding it may read it).
func linkID(t *testing.T, link string) string {
	t.Helper()
	tok := link[strings.LastIndex(link, "/l/")+3:]
	body, _, _ := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		ID string `json:"i"`
	}
	if err := json.Unmarshal(raw, &l); err != nil || l.ID == "" {
		t.Fatalf("link body %s: %v", raw, err)
	}
	return l.ID
}

// A link decides once — also when its ask goes stale and is asked again
// under the same id. The approval dave gave through his link went stale
// (the vendor's bank account changed), the run asked again: the same link
// must not decide the new round (a forwarded or leaked link would
// otherwise approve the new bank account as well).
func TestWebAttackUsedLinkDoesNotDecideTheAskAgainAfterStale(t *testing.T) {
	var mu sync.Mutex
	vendor := map[string]any{"bank_account": "DE00 2048", "status": "active"}
	tools := echoTools()
	tools["erp.get_vendor"] = func(json.RawMessage) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(vendor), nil
	}
	e := newEnv(t, nil, tools)
	s := webOn(t, e)
	r := e.start("alice", "vendor-payment")
	e.settle()
	ask := r.GetId() + "/ask_1"
	link, err := s.h.PersonLink(ask, "dave", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(link, s.url)
	dave := s.browser()
	dave.signIn("dave")
	_, page := dave.get(path)
	mu.Lock()
	vendor["bank_account"] = "DE00 7731"
	mu.Unlock()
	if code, _ := dave.post(path, approveForm(page)); code != http.StatusSeeOther {
		t.Fatalf("first use: %d\n%s", code, dave.last)
	}
	e.settle()
	again, err := e.approvals("dave").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if err != nil || again.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING || !strings.Contains(again.GetAsk().GetActions()[0].GetArgsJson(), "DE00 7731") {
		t.Fatalf("the ask is asked again with the new account: %v %v", again.GetAsk(), err)
	}
	code, page := dave.get(path)
	if code != http.StatusOK || !strings.Contains(text(page, "link-used"), "already used") || strings.Contains(page, `name="decision"`) {
		t.Errorf("the used link's page after the ask was asked again: %d, link-used %q, offers a decision %v", code, text(page, "link-used"), strings.Contains(page, `name="decision"`))
	}
	// The form as the page offered it before, with a fresh token.
	f := approveForm(page)
	f.Set("payload_digest", again.GetAsk().GetPayloadDigest())
	f.Set("evidence_digest", again.GetAsk().GetEvidenceDigest())
	_, inbox := dave.get("/")
	f.Set("csrf", field(inbox, "csrf"))
	if code, _ := dave.post(path, f); code != http.StatusConflict {
		t.Errorf("a second use of the link on the ask asked again: %d, want 409", code)
	}
	if n := decisionsThrough(t, e, r.GetId(), linkID(t, link)); n != 1 {
		t.Fatalf("%d decisions through one single-use link, want 1", n)
	}
}

// Many POSTs through one link at once (a double click, a retrying proxy,
// an attacker racing the holder): at most one decision is recorded
// through it, whatever mix of decisions races.
func TestWebAttackOneLinkRacedDecidesOnce(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e, func(c *web.Config) { c.LinkSignsIn = true })
	ask := parkedVendorPayment(t, e)
	link, _ := s.h.PersonLink(ask, "dave", time.Now().Add(time.Hour))
	path := strings.TrimPrefix(link, s.url)
	b := s.browser()
	_, page := b.get(path)
	forms := []url.Values{
		approveForm(page),
		{"decision": {"evidence"}, "what": {"the PO"}},
		{"decision": {"amend"}, "field": {"amount"}, "value": {"90000"}, "payload_digest": {field(page, "payload_digest")}},
		{"decision": {"reject"}, "reason": {"no"}},
	}
	csrf := field(page, "csrf")
	var wg sync.WaitGroup
	codes := make(chan int, 16)
	for i := range 16 {
		f := maps.Clone(forms[i%len(forms)])
		f.Set("csrf", csrf)
		wg.Go(func() {
			c := s.browser()
			code, body := c.do(http.MethodPost, path, f, nil)
			if code >= 500 {
				t.Logf("%d: %s", code, text(body, "error"))
			}
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		switch c {
		case http.StatusSeeOther:
			ok++
		case http.StatusConflict, http.StatusBadRequest, http.StatusForbidden:
		default:
			t.Errorf("a raced POST answered %d", c)
		}
	}
	run := strings.Split(ask, "/")[0]
	if n := decisionsThrough(t, e, run, linkID(t, link)); n != 1 || ok != 1 {
		t.Fatalf("%d decisions through one link (%d POSTs answered as decided), want 1", n, ok)
	}
}

// A link alone (links that sign in) is for its one ask: it reaches no
// other page, its form token decides nothing elsewhere, and it cannot
// grant a standing approval — that approves later asks the link was never
// about, for as long as its holder says.
func TestWebAttackLinkSessionStaysOnItsAsk(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e, func(c *web.Config) { c.LinkSignsIn = true })
	ask := parkedVendorPayment(t, e)
	other := parkedVendorPayment(t, e)
	link, _ := s.h.PersonLink(ask, "dave", time.Now().Add(time.Hour))
	path := strings.TrimPrefix(link, s.url)
	b := s.browser()
	code, page := b.get(path)
	if code != http.StatusOK {
		t.Fatalf("the link: %d", code)
	}
	csrf := field(page, "csrf")
	for _, p := range []string{"/", "/runs", "/runs/" + strings.Split(other, "/")[0], "/asks/" + other, "/inbox/list", "/events"} {
		if code, _ := b.get(p); code == http.StatusOK {
			t.Errorf("the link's holder reached %s", p)
		}
	}
	// The link's form token on another ask's (or the same ask's) page.
	for _, target := range []string{other, ask} {
		f := approveForm(page)
		f.Set("csrf", csrf)
		if code, loc := b.do(http.MethodPost, "/asks/"+target, f, nil); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
			t.Errorf("the link's token on /asks/%s: %d %s, want to be sent to sign in", target, code, loc)
		}
	}
	if strings.Contains(page, `value="standing"`) {
		t.Errorf("a link-only page offers a standing approval")
	}
	st := url.Values{"decision": {"standing"}, "option": {"1"}, "until": {"2999-12-31"}, "scope": {"payments.pay vendor=V-1187 amount<=500000"},
		"reason": {"from an email"}, "payload_digest": {field(page, "payload_digest")}, "evidence_digest": {field(page, "evidence_digest")}, "csrf": {csrf}}
	if code, _ := b.do(http.MethodPost, path, st, nil); code == http.StatusSeeOther {
		t.Errorf("a link alone granted a standing approval")
	}
	xs, err := e.approvals("audrey").ListExceptions(context.Background(), &tollgatev1.ListExceptionsRequest{IncludeInactive: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs.GetExceptions()) != 0 {
		t.Fatalf("standing approvals after link-only POSTs: %v", xs.GetExceptions())
	}
	for _, a := range []string{ask, other} {
		got, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: a})
		if d := got.GetAsk().GetDecisions(); len(d) != 0 {
			t.Errorf("%s decided: %v", a, d)
		}
	}
}

// After signing in the browser goes back to this inbox only — also when
// the return path hides a second slash behind a character browsers drop
// from URLs (tab, newline) or read as a slash (backslash).
func TestWebAttackSignInReturnStaysHere(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	for _, ret := range []string{"/\t/evil.example", "/\t\\evil.example", "\t//evil.example", "/\\\tevil.example", "/\n/evil.example"} {
		b := s.browser()
		b.get("/signin?return=" + url.QueryEscape(ret))
		f := url.Values{"user": {"dave"}, "return": {ret}, "csrf": {field(b.last, "csrf")}}
		req, _ := http.NewRequest(http.MethodPost, s.url+"/signin/dev", strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, c := range b.c.Jar.Cookies(req.URL) {
			req.AddCookie(c)
		}
		// Go's client will not follow such a Location; a browser does.
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		code, loc := resp.StatusCode, resp.Header.Get("Location")
		if code != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", code)
		}
		// What a browser makes of the Location (WHATWG URL: tab and
		// newlines removed, backslash a slash in http(s) URLs).
		norm := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(loc)
		if !strings.HasPrefix(norm, "/") || strings.HasPrefix(norm, "//") {
			t.Errorf("return %q: Location %q, which a browser follows to another site", ret, loc)
		}
	}
}

// A decision posted for an ask the person may not see is refused exactly
// as one for an ask that does not exist: the answer does not tell them
// the ask exists.
func TestWebAttackInvisibleAskIsNotFound(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	ask := parkedVendorPayment(t, e)
	run := strings.Split(ask, "/")[0]
	m := s.browser()
	m.signIn("mallory")
	_, home := m.get("/")
	csrf := field(home, "csrf")
	answer := func(path string, post bool) (int, string) {
		if post {
			return m.do(http.MethodPost, path, url.Values{"decision": {"reject"}, "reason": {"x"}, "csrf": {csrf}}, nil)
		}
		return m.get(path)
	}
	for _, post := range []bool{false, true} {
		c1, p1 := answer("/asks/"+ask, post)
		c2, p2 := answer("/asks/"+run+"/ask_9", post)
		c3, p3 := answer("/asks/r_doesnotexist/ask_1", post)
		norm := func(p string) string {
			p = strings.ReplaceAll(p, run, "RUN")
			p = strings.ReplaceAll(p, "r_doesnotexist", "RUN")
			return strings.ReplaceAll(p, "ask_9", "ask_1")
		}
		if c1 != http.StatusNotFound || c1 != c2 || c1 != c3 || norm(text(p1, "message")) != norm(text(p3, "message")) || norm(text(p2, "message")) != norm(text(p3, "message")) {
			t.Errorf("post=%v: invisible %d %q; missing ask %d %q; missing run %d %q", post, c1, text(p1, "message"), c2, text(p2, "message"), c3, text(p3, "message"))
		}
	}
	got, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if len(got.GetAsk().GetDecisions()) != 0 {
		t.Fatal("decided")
	}
}

// An operator who gives a loopback http --web-url but listens on every
// interface would serve sessions in the clear to the network: refused, as
// a plain-http inbox off loopback is.
func TestWebAttackPlainHTTPOffLoopbackRefused(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "web.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 48)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://127.0.0.1:7445", "http://localhost:7445"} {
		site, lis, err := webSite(&Options{WebListen: "0.0.0.0:0", WebURL: u, WebKey: key}, nil)
		if lis != nil {
			lis.Close()
		}
		if err == nil || site != nil {
			t.Errorf("--web-listen 0.0.0.0 --web-url %s (no TLS): accepted", u)
		}
	}
	// Behind a proxy that ends TLS (an https --web-url), the listener may
	// be off loopback.
	site, lis, err := webSite(&Options{WebListen: "0.0.0.0:0", WebURL: "https://inbox.example.com", WebKey: key}, nil)
	if err != nil || site == nil {
		t.Fatalf("an https --web-url off loopback: %v", err)
	}
	lis.Close()
}

// A standing approval from the form with an empty scope is refused (it
// never means "everything"), as is one wider than the granter's authority;
// neither approves the ask.
func TestWebAttackStandingScopeNeverEverything(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	ask := parkedVendorPayment(t, e)
	dave := s.browser()
	dave.signIn("dave")
	_, page := dave.get("/asks/" + ask)
	for _, scope := range []string{"", "   ", "payments.pay", "payments.pay amount<=99999999999"} {
		f := url.Values{"decision": {"standing"}, "option": {"1"}, "until": {"2999-12-31"}, "scope": {scope}, "reason": {"r"},
			"payload_digest": {field(page, "payload_digest")}, "evidence_digest": {field(page, "evidence_digest")}, "csrf": {field(page, "csrf")}}
		if code, _ := dave.do(http.MethodPost, "/asks/"+ask, f, nil); code == http.StatusSeeOther {
			t.Errorf("a standing approval with scope %q was granted", scope)
		}
	}
	xs, _ := e.approvals("audrey").ListExceptions(context.Background(), &tollgatev1.ListExceptionsRequest{IncludeInactive: true})
	got, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if len(xs.GetExceptions()) != 0 || len(got.GetAsk().GetDecisions()) != 0 {
		t.Fatalf("standing approvals %v, decisions %v", xs.GetExceptions(), got.GetAsk().GetDecisions())
	}
}

// A gRPC client cannot say it is the web, nor name a link: whatever its
// metadata claims, its decision is recorded as through the API, with no
// link (the surface is set only inside the control plane).
func TestWebAttackGRPCCannotClaimASurface(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	ask := parkedVendorPayment(t, e)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "via", "web", "link", "lnk_forged", "surface", "slack", "x-tollgate-via", "web link lnk_forged")
	if _, err := e.approvals("dave").Decide(ctx, approve(ask)); err != nil {
		t.Fatal(err)
	}
	got, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if d := got.GetAsk().GetDecisions(); len(d) != 1 || d[0].GetVia() != "api" {
		t.Fatalf("a gRPC decision with forged metadata is recorded as %v", d)
	}
}

// Two replicas on one store, behind one web key (a load balancer sends
// each request where it likes): a session made by one is good on the
// other, and a link used through one is refused through the other — the
// ask records the use, not the replica's memory.
func TestWebAttackLinkUsedOnAnotherReplica(t *testing.T) {
	st := memstore.New(memstore.Config{})
	a := newEnvOn(t, st, devPolicy(t), echoTools())
	b := newEnvOn(t, st, devPolicy(t), echoTools())
	sa, sb := webOn(t, a), webOn(t, b)
	r := b.runs("alice")
	resp, err := r.StartRun(context.Background(), &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
	if err != nil {
		t.Fatal(err)
	}
	a.settle()
	b.settle()
	ask := resp.GetRun().GetId() + "/ask_1"
	link, err := sa.h.PersonLink(ask, "dave", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(link, sa.url)
	onA := sa.browser()
	onA.signIn("dave")
	_, page := onA.get(path)
	if code, _ := onA.post(path, url.Values{"decision": {"amend"}, "field": {"amount"}, "value": {"90000"}, "payload_digest": {field(page, "payload_digest")}}); code != http.StatusSeeOther {
		t.Fatalf("amend through the link on replica A: %d\n%s", code, text(onA.last, "error"))
	}
	// The same browser's cookies, sent to replica B.
	onB := &browser{t: t, s: sb, c: onA.c}
	code, page := onB.get(path)
	if code != http.StatusOK || !strings.Contains(text(page, "link-used"), "dave already used this link") {
		t.Fatalf("the link on replica B: %d %q", code, text(page, "link-used"))
	}
	f := approveForm(page)
	f.Set("csrf", field(page, "csrf"))
	if code, page := onB.post(path, f); code != http.StatusConflict || !strings.Contains(text(page, "error"), "already used") {
		t.Fatalf("a second use through replica B: %d %q", code, text(page, "error"))
	}
	got, _ := b.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if d := got.GetAsk().GetDecisions(); len(d) != 1 || got.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
		t.Fatalf("after a use on A and a second on B: %s %v", got.GetAsk().GetState(), d)
	}
}

// A form larger than the inbox takes is refused before anything is
// decided, whatever it says.
func TestWebAttackOversizedFormDecidesNothing(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	s := webOn(t, e)
	ask := parkedVendorPayment(t, e)
	dave := s.browser()
	dave.signIn("dave")
	_, page := dave.get("/asks/" + ask)
	f := url.Values{"decision": {"reject"}, "reason": {strings.Repeat("x", 80<<10)}, "csrf": {field(page, "csrf")}}
	if code, _ := dave.post("/asks/"+ask, f); code == http.StatusSeeOther {
		t.Fatalf("an 80 KiB form was taken")
	}
	got, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if len(got.GetAsk().GetDecisions()) != 0 || got.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
		t.Fatalf("an oversized form decided: %v", got.GetAsk().GetDecisions())
	}
}
