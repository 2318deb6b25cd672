package slackapp

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// postedValue posts the ask to the channel and returns the value its
// Approve button carries, as Slack would send it back.
func (fx *fixture) postedValue() string {
	fx.t.Helper()
	if d := fx.app.Deliver(fx.t.Context(), "slack:C0APPROVE", event(fx.t, webhook.KindOpened), nil); d.Outcome != webhook.Delivered {
		fx.t.Fatalf("posting the ask: %+v", d)
	}
	b, ok := buttonValueOf(fx.t, fx.slack.Calls("chat.postMessage")[0].Blocks, actionApprove)
	if !ok {
		fx.t.Fatal("posted message has no Approve button")
	}
	return b["value"].(string)
}

func TestSignedApproveDecidesAsTheMappedPerson(t *testing.T) {
	fx := newFixture(t, nil)
	value := fx.postedValue()
	body := fx.interactionBody("U0DAVE", "T1", actionApprove, value)
	if code := fx.post(body, testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("signed approve: HTTP %d, want 200", code)
	}
	reply := fx.slack.waitFor("response_url", 1)[0]
	calls := fx.decider.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d Decide calls, want 1", len(calls))
	}
	c := calls[0]
	if want := (identity.Principal{Subject: "dave", Kind: identity.KindPerson, Issuer: "slack"}); c.Who.Subject != want.Subject || c.Who.Kind != want.Kind || c.Who.Issuer != want.Issuer {
		t.Errorf("decided as %+v, want %+v", c.Who, want)
	}
	if c.Via != (api.Via{Surface: api.SurfaceSlack}) {
		t.Errorf("via %+v, want slack", c.Via)
	}
	if c.Req.GetAskId() != testAsk || c.Req.GetExpectedPayloadDigest() != testPayloadDigest || c.Req.GetExpectedEvidenceDigest() != testEvidenceDigest ||
		c.Req.GetApprove().GetOptionId() != "1" {
		t.Errorf("request = %v, want approve option 1 of the ask with the digests the message showed", c.Req)
	}
	if reply.JSON["replace_original"] != true {
		t.Errorf("the message was not replaced: %v", reply.JSON)
	}
	all := blocksText(reply.Blocks)
	if !strings.Contains(all, "Approved by dave at 14:02 UTC on 1 May 2030") {
		t.Errorf("redrawn message does not say who decided and when:\n%s", all)
	}
	if _, ok := buttonValueOf(t, reply.Blocks, actionApprove); ok {
		t.Error("redrawn message still has an Approve button")
	}
}

func TestRejectRecordsAReason(t *testing.T) {
	fx := newFixture(t, nil)
	value := fx.postedValue()
	if code := fx.post(fx.interactionBody("U0BOB", "T1", actionReject, value), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	fx.slack.waitFor("response_url", 1)
	c := fx.decider.Calls()
	if len(c) != 1 || c[0].Req.GetReject().GetReason() != "rejected in Slack by bob" || c[0].Who.Subject != "bob" {
		t.Fatalf("calls = %+v, want bob rejecting with a reason", c)
	}
}

func TestForgedStaleAndReplayedInteractionsAreRefused(t *testing.T) {
	fx := newFixture(t, nil)
	value := fx.postedValue()
	body := fx.interactionBody("U0DAVE", "T1", actionApprove, value)
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	good := sign(testSecret, ts, body)

	cases := []struct {
		name     string
		body     []byte
		ts, sig  string
		wantCode int
	}{
		{"wrong secret", body, ts, sign("another-secret-of-someone-else", ts, body), http.StatusUnauthorized},
		{"body changed after signing", []byte(strings.Replace(string(body), "U0DAVE", "U0BOB", 1)), ts, good, http.StatusUnauthorized},
		{"timestamp changed after signing", body, strconv.FormatInt(now.Unix()+1, 10), good, http.StatusUnauthorized},
		{"no signature", body, ts, "", http.StatusUnauthorized},
		{"no timestamp", body, "", good, http.StatusUnauthorized},
		{"not v0", body, ts, "v1=" + strings.TrimPrefix(good, "v0="), http.StatusUnauthorized},
		{"six minutes old", body, strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10), sign(testSecret, strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10), body), http.StatusUnauthorized},
		{"six minutes ahead", body, strconv.FormatInt(now.Add(6*time.Minute).Unix(), 10), sign(testSecret, strconv.FormatInt(now.Add(6*time.Minute).Unix(), 10), body), http.StatusUnauthorized},
	}
	for _, c := range cases {
		if code := fx.postWith(c.body, c.ts, c.sig); code != c.wantCode {
			t.Errorf("%s: HTTP %d, want %d", c.name, code, c.wantCode)
		}
	}
	if n := fx.replayLen(); n != 0 {
		t.Errorf("refused requests left %d replay entries", n)
	}
	if n := len(fx.decider.Calls()); n != 0 {
		t.Fatalf("refused requests reached Decide %d times", n)
	}

	// The genuine request once: decided. The same request again (a
	// replay inside Slack's window), also with the signature's hex in
	// upper case: refused, nothing more decided.
	if code := fx.postWith(body, ts, good); code != http.StatusOK {
		t.Fatalf("genuine: HTTP %d", code)
	}
	fx.slack.waitFor("response_url", 1)
	if code := fx.postWith(body, ts, good); code != http.StatusUnauthorized {
		t.Errorf("replay: HTTP %d, want 401", code)
	}
	if code := fx.postWith(body, ts, "v0="+strings.ToUpper(strings.TrimPrefix(good, "v0="))); code != http.StatusUnauthorized {
		t.Errorf("replay with upper-case hex: HTTP %d, want 401", code)
	}
	if n := len(fx.decider.Calls()); n != 1 {
		t.Fatalf("Decide called %d times, want once", n)
	}
}

func (fx *fixture) replayLen() int { return fx.app.replay.Len() }

func TestUnmappedUserCannotDecide(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.TeamID = "T1" })
	value := fx.postedValue()
	// Not in the map, and emails are not people here.
	if code := fx.post(fx.interactionBody("U0MALLORY", "T1", actionApprove, value), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	// dave's id, but from another workspace.
	if code := fx.post(fx.interactionBody("U0DAVE", "T9", actionApprove, value), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	replies := fx.slack.waitFor("response_url", 2)
	for _, r := range replies {
		if r.JSON["response_type"] != "ephemeral" || r.JSON["replace_original"] != false ||
			!strings.Contains(r.JSON["text"].(string), "not linked to a Tollgate identity") {
			t.Errorf("reply = %v, want an ephemeral 'not linked'", r.JSON)
		}
	}
	if n := len(fx.decider.Calls()); n != 0 {
		t.Fatalf("an unmapped user reached Decide %d times", n)
	}
	if n := len(fx.slack.Calls("users.info")); n != 0 {
		t.Errorf("users.info called %d times without EmailIsPerson", n)
	}
}

func TestEmailMapsOnlyWhenConfirmed(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.EmailIsPerson = true; c.TeamID = "T1" })
	user := func(id, email string, confirmed bool) map[string]any {
		return map[string]any{"id": id, "team_id": "T1", "name": "x", "deleted": false, "is_bot": false,
			"is_email_confirmed": confirmed, "profile": map[string]any{"email": email}}
	}
	fx.slack.users["U0ERIN"] = user("U0ERIN", "Erin@Example.com", true)
	fx.slack.users["U0EVE"] = user("U0EVE", "erin@example.com", false)
	value := fx.postedValue()
	if code := fx.post(fx.interactionBody("U0EVE", "T1", actionApprove, value), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	r := fx.slack.waitFor("response_url", 1)[0]
	if !strings.Contains(r.JSON["text"].(string), "not linked") || len(fx.decider.Calls()) != 0 {
		t.Fatalf("an unconfirmed email decided: %v, %d calls", r.JSON, len(fx.decider.Calls()))
	}
	if code := fx.post(fx.interactionBody("U0ERIN", "T1", actionApprove, value), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	fx.slack.waitFor("response_url", 2)
	c := fx.decider.Calls()
	if len(c) != 1 || c[0].Who.Subject != "erin@example.com" {
		t.Fatalf("calls = %+v, want one as erin@example.com", c)
	}
	if ui := fx.slack.Calls("users.info"); len(ui) != 2 || ui[1].Form.Get("user") != "U0ERIN" || ui[1].Form.Get("token") != testToken {
		t.Errorf("users.info calls = %+v", ui)
	}
}

func TestRefusalIsShownEphemerally(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{status.Error(codes.PermissionDenied, "separation of duties: you started this run"), []string{"Not decided: separation of duties: you started this run"}},
		{status.Error(codes.FailedPrecondition, "the payload changed since you were shown it"), []string{"the payload changed since you were shown it", "open it to see it as it is now"}},
		{status.Error(codes.Unavailable, "store down"), []string{"may not have been recorded"}},
	} {
		fx := newFixture(t, nil)
		fx.decider.answer = func(*tollgatev1.DecideRequest, identity.Principal) (*tollgatev1.DecideResponse, error) {
			return nil, tc.err
		}
		value := fx.postedValue()
		if code := fx.post(fx.interactionBody("U0DAVE", "T1", actionApprove, value), testSecret, time.Now()); code != http.StatusOK {
			t.Fatalf("HTTP %d", code)
		}
		r := fx.slack.waitFor("response_url", 1)[0]
		text, _ := r.JSON["text"].(string)
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%v: reply %q lacks %q", tc.err, text, w)
			}
		}
		if r.JSON["response_type"] != "ephemeral" || r.JSON["replace_original"] != false {
			t.Errorf("%v: reply is not ephemeral: %v", tc.err, r.JSON)
		}
		if len(fx.decider.Calls()) != 1 {
			t.Errorf("%v: Decide called %d times", tc.err, len(fx.decider.Calls()))
		}
	}
}

func TestOpenClickDecidesNothing(t *testing.T) {
	fx := newFixture(t, nil)
	if code := fx.post(fx.interactionBody("U0DAVE", "T1", actionOpen, ""), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	// A later click's answer arrives after anything the Open click could
	// have caused: a single worker works the queue in order.
	fx2 := newFixture(t, func(c *Config) { c.Workers = 1 })
	if code := fx2.post(fx2.interactionBody("U0DAVE", "T1", actionOpen, ""), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	if code := fx2.post(fx2.interactionBody("U0MALLORY", "T1", actionApprove, `{"a":"x","o":"1"}`), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	fx2.slack.waitFor("response_url", 1)
	if n := len(fx.decider.Calls()) + len(fx2.decider.Calls()); n != 0 {
		t.Fatalf("opening decided (%d calls)", n)
	}
	if n := len(fx2.slack.Calls("response_url")); n != 1 {
		t.Errorf("%d replies, want only mallory's", n)
	}
}

func TestBoundsFailClosed(t *testing.T) {
	// The body cap.
	fx := newFixture(t, func(c *Config) { c.MaxBody = 512 })
	big := fx.interactionBody("U0DAVE", "T1", actionApprove, strings.Repeat("x", 600))
	if code := fx.post(big, testSecret, time.Now()); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: HTTP %d, want 413", code)
	}
	// A replay cache full of live signatures takes no more.
	fx = newFixture(t, func(c *Config) { c.ReplayEntries = 1 })
	value := fx.postedValue()
	if code := fx.post(fx.interactionBody("U0DAVE", "T1", actionApprove, value), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("first: HTTP %d", code)
	}
	if code := fx.post(fx.interactionBody("U0BOB", "T1", actionApprove, value), testSecret, time.Now()); code != http.StatusServiceUnavailable {
		t.Errorf("replay cache full: HTTP %d, want 503", code)
	}
	fx.slack.waitFor("response_url", 1)
	if n := len(fx.decider.Calls()); n != 1 {
		t.Errorf("Decide called %d times, want 1", n)
	}
}

func TestResponseURLMustBeSlacks(t *testing.T) {
	fx := newFixture(t, nil)
	for u, ok := range map[string]bool{
		"https://hooks.slack.com/actions/T1/1/abc":     true,
		fx.slack.srv.URL + "/hooks/x":                  true,
		"http://hooks.slack.com/actions/T1/1/abc":      false,
		"https://hooks.slack.com.evil.example/a":       false,
		"https://evil.example/actions":                 false,
		"https://user:pw@hooks.slack.com/actions/T1/1": false,
	} {
		if got := fx.app.responseURLOK(u); got != ok {
			t.Errorf("responseURLOK(%q) = %v, want %v", u, got, ok)
		}
	}
	// Not Slack's: the answer goes through the Web API instead.
	value := fx.postedValue()
	body := strings.Replace(string(fx.interactionBody("U0MALLORY", "T1", actionApprove, value)), "response_url%22%3A%22http", "response_url%22%3A%22https%3A%2F%2Fevil.example%2F%3Fx%3Dhttp", 1)
	if code := fx.post([]byte(body), testSecret, time.Now()); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	e := fx.slack.waitFor("chat.postEphemeral", 1)[0]
	if e.Form.Get("channel") != "C0APPROVE" || e.Form.Get("user") != "U0MALLORY" {
		t.Errorf("ephemeral = %v", e.Form)
	}
}
