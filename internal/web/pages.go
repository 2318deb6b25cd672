package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/humantext"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// as is ctx with the session's person as the caller, through the web (and
// the link, for a link's decision).
func (h *Handler) as(ctx context.Context, s *session, linkID string) context.Context {
	return h.cfg.Caller(ctx, s.principal(), linkID)
}

// signedIn is the request's session, or nil after sending the browser to
// sign in.
func (h *Handler) signedIn(w http.ResponseWriter, r *http.Request) *session {
	s := h.session(r)
	if s == nil {
		h.needSignin(w, r)
	}
	return s
}

// httpStatus is the HTTP status of an API error.
func httpStatus(err error) int {
	switch status.Code(err) {
	case codes.NotFound:
		return http.StatusNotFound
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.FailedPrecondition, codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// apiMessage is what an API error says, for the person who caused it.
func apiMessage(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// inbox is the asks the person may decide (or must answer), soonest
// deadline first, each with why it came to them and what its deadline
// does: one ListAsks, whatever the number of asks.
func (h *Handler) inbox(w http.ResponseWriter, r *http.Request) {
	s := h.signedIn(w, r)
	if s == nil {
		return
	}
	items, err := h.inboxItems(r.Context(), s)
	if err != nil {
		h.fail(w, r, httpStatus(err), s, apiMessage(err))
		return
	}
	h.render(w, r, http.StatusOK, "inbox", s, map[string]any{"Items": items})
}

// inboxList is the inbox's list alone, which the page's live updates
// fetch when the inbox changes.
func (h *Handler) inboxList(w http.ResponseWriter, r *http.Request) {
	s := h.session(r)
	if s == nil {
		http.Error(w, "sign in", http.StatusUnauthorized)
		return
	}
	items, err := h.inboxItems(r.Context(), s)
	if err != nil {
		http.Error(w, apiMessage(err), httpStatus(err))
		return
	}
	h.render(w, r, http.StatusOK, "inboxlist", s, map[string]any{"Items": items})
}

// item is one ask in the inbox.
type item struct {
	ID, Title, Run, Requester, Why, State string
	Deadline, OnExpiry                    string
	Overdue, Voted                        bool
	Approvals, Quorum                     int32
}

func (h *Handler) inboxItems(ctx context.Context, s *session) ([]item, error) {
	ctx = h.as(ctx, s, "")
	resp, err := h.cfg.API.ListAsks(ctx, &tollgatev1.ListAsksRequest{PageSize: 100})
	if err != nil {
		return nil, err
	}
	now := h.cfg.Now()
	out := make([]item, 0, len(resp.GetItems()))
	for _, it := range resp.GetItems() {
		a := it.GetAsk()
		exp := a.GetExpiresAt().AsTime()
		x := item{ID: a.GetId(), Title: humantext.Escape(a.GetTitle()), Run: a.GetRunId(), Requester: a.GetRequester(), Why: humantext.Escape(it.GetWhy()),
			State: stateWord(a.GetState()), Deadline: humantext.Deadline(exp.UTC(), now.UTC()), Overdue: !now.Before(exp),
			Voted: it.GetDecidedByCaller(), Approvals: a.GetApprovals(), Quorum: a.GetQuorum(),
			OnExpiry: "on expiry " + plan.ExpiryOutcome(wire.OnExpiry(a.GetOnExpiry()))}
		out = append(out, x)
	}
	return out, nil
}

func stateWord(s tollgatev1.AskState) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.String(), "ASK_STATE_"), "_", " "))
}

// events streams the inbox's changes (Server-Sent Events from the API's
// WatchAsks): the page's script fetches the list again on each, so a new
// ask appears without a reload. Without JavaScript the page works; it
// only does not update itself.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	s := h.session(r)
	if s == nil {
		http.Error(w, "sign in", http.StatusUnauthorized)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	synced := false
	err := h.cfg.API.WatchAsks(h.as(r.Context(), s, ""), &tollgatev1.WatchAsksRequest{}, func(ev *tollgatev1.WatchAsksResponse) error {
		if ev.GetKind() == tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_SYNCED {
			synced = true
			_, err := fmt.Fprint(w, "event: synced\ndata: {}\n\n")
			fl.Flush()
			return err
		}
		if !synced {
			return nil // the page already shows the inbox as it was
		}
		kind := strings.ToLower(strings.TrimPrefix(ev.GetKind().String(), "INBOX_CHANGE_KIND_"))
		data, _ := json.Marshal(map[string]string{"kind": kind, "ask": ev.GetItem().GetAsk().GetId(), "title": humantext.Escape(ev.GetItem().GetAsk().GetTitle())})
		_, err := fmt.Fprintf(w, "event: inbox\ndata: %s\n\n", data)
		fl.Flush()
		return err
	})
	if err != nil && r.Context().Err() == nil {
		h.cfg.Log.Info("web: inbox watch ended", "error", err)
	}
}

// askPage is the whole decision packet with every decision the person may
// make on it, or why they may not.
func (h *Handler) askPage(w http.ResponseWriter, r *http.Request) {
	s := h.signedIn(w, r)
	if s == nil {
		return
	}
	h.showAsk(w, r, s, r.PathValue("run")+"/"+r.PathValue("ask"), nil, http.StatusOK, "")
}

// showAsk renders the packet of askID for s (through lk, a link, when
// set), with msg (an error, or what was just done) above it.
func (h *Handler) showAsk(w http.ResponseWriter, r *http.Request, s *session, askID string, lk *linkView, code int, msg string) {
	resp, err := h.cfg.API.GetAsk(h.as(r.Context(), s, ""), &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		h.fail(w, r, httpStatus(err), s, apiMessage(err))
		return
	}
	p := h.packet(resp, s)
	p.Link = lk
	p.Action = "/asks/" + askID
	if lk != nil {
		p.Action = "/l/" + lk.Token
		if lk.UsedBy != "" {
			p.MayDecide = false
		}
	}
	if done := r.URL.Query().Get("done"); done != "" && msg == "" && code == http.StatusOK {
		p.Done = doneText(done, resp.GetAsk(), s.Subject)
	}
	if code != http.StatusOK {
		p.Error = msg
	}
	h.render(w, r, code, "ask", s, p)
}

// doneText says what the person's last decision did, after the redirect
// that follows it.
func doneText(kind string, a *tollgatev1.Ask, who string) string {
	for i := len(a.GetDecisions()) - 1; i >= 0; i-- {
		d := a.GetDecisions()[i]
		if d.GetActor() == who {
			return fmt.Sprintf("Recorded: %s by %s at %s. The ask is now %s.", decisionWord(d.GetKind()), who, d.GetTime().AsTime().UTC().Format("15:04:05 MST"), stateWord(a.GetState()))
		}
	}
	return ""
}

func decisionWord(k tollgatev1.DecisionKind) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k.String(), "DECISION_KIND_"), "_", " "))
}

// decide makes one decision from the packet's page: a POST with the
// session's CSRF token; approvals quote the digests the page showed.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	s := h.signedIn(w, r)
	if s == nil {
		return
	}
	askID := r.PathValue("run") + "/" + r.PathValue("ask")
	if !h.checkCSRF(r, s) {
		h.showAsk(w, r, s, askID, nil, http.StatusForbidden, "This decision did not come from this inbox's own page (its form token is missing or wrong), so nothing was decided. Decide from the page below.")
		return
	}
	h.decideAs(w, r, s, askID, nil)
}

func (h *Handler) decideAs(w http.ResponseWriter, r *http.Request, s *session, askID string, lk *linkView) {
	req, err := decideRequest(r, askID, h.cfg.Now())
	if err != nil {
		h.showAsk(w, r, s, askID, lk, http.StatusBadRequest, err.Error())
		return
	}
	linkID := ""
	if lk != nil {
		linkID = lk.ID
	}
	if _, err := h.cfg.API.Decide(h.as(r.Context(), s, linkID), req); err != nil {
		h.showAsk(w, r, s, askID, lk, httpStatus(err), apiMessage(err))
		return
	}
	target := "/asks/" + askID
	if lk != nil {
		target = "/l/" + lk.Token
	}
	http.Redirect(w, r, target+"?done="+url.QueryEscape(r.PostFormValue("decision")), http.StatusSeeOther)
}

// decideRequest is the form's decision.
func decideRequest(r *http.Request, askID string, now time.Time) (*tollgatev1.DecideRequest, error) {
	f := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	req := &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: f("payload_digest"), ExpectedEvidenceDigest: f("evidence_digest")}
	switch f("decision") {
	case "approve":
		req.Decision = &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: f("option"), Reason: f("reason")}}
	case "reject":
		if f("reason") == "" {
			return nil, errors.New("say why you reject it: a reason is required")
		}
		req.Decision = &tollgatev1.DecideRequest_Reject{Reject: &tollgatev1.Reject{Reason: f("reason")}}
	case "evidence":
		if f("what") == "" {
			return nil, errors.New("say what evidence you need")
		}
		req.Decision = &tollgatev1.DecideRequest_RequestEvidence{RequestEvidence: &tollgatev1.RequestEvidence{What: f("what")}}
	case "amend":
		if f("field") == "" || f("value") == "" {
			return nil, errors.New("give the field to amend and its new value")
		}
		req.Decision = &tollgatev1.DecideRequest_Amend{Amend: &tollgatev1.Amend{Field: f("field"), NewValueJson: f("value"), Reason: f("reason")}}
	case "delegate":
		if f("to") == "" {
			return nil, errors.New("say whom to hand the decision to")
		}
		req.Decision = &tollgatev1.DecideRequest_Delegate{Delegate: &tollgatev1.Delegate{To: f("to"), Reason: f("reason")}}
	case "standing":
		until, err := time.Parse("2006-01-02", f("until"))
		if err != nil {
			return nil, errors.New("give the last day the standing approval holds (YYYY-MM-DD)")
		}
		// Through the whole of that day, UTC.
		until = until.Add(24 * time.Hour)
		if !until.After(now) {
			return nil, errors.New("the standing approval's last day has passed")
		}
		req.Decision = &tollgatev1.DecideRequest_ApproveException{ApproveException: &tollgatev1.ApproveException{OptionId: f("option"), Until: wire.Time(until), Scope: f("scope"), Reason: f("reason")}}
	case "answer":
		if f("text") == "" {
			return nil, errors.New("the answer is empty")
		}
		req.Decision = &tollgatev1.DecideRequest_TextAnswer{TextAnswer: &tollgatev1.TextAnswer{Text: r.PostFormValue("text")}}
	case "revoke":
		if f("reason") == "" {
			return nil, errors.New("say why you revoke your approval")
		}
		req.Decision = &tollgatev1.DecideRequest_Revoke{Revoke: &tollgatev1.Revoke{Reason: f("reason")}}
	default:
		return nil, fmt.Errorf("no such decision %q", f("decision"))
	}
	return req, nil
}

// runsPage lists the runs the person may see.
func (h *Handler) runsPage(w http.ResponseWriter, r *http.Request) {
	s := h.signedIn(w, r)
	if s == nil {
		return
	}
	resp, err := h.cfg.API.ListRuns(h.as(r.Context(), s, ""), &tollgatev1.ListRunsRequest{PageSize: 100})
	if err != nil {
		h.fail(w, r, httpStatus(err), s, apiMessage(err))
		return
	}
	now := h.cfg.Now()
	type row struct {
		ID, Name, Requester, State, Reason, Age, Schedule string
		Open                                              int32
	}
	var rows []row
	for _, x := range resp.GetRuns() {
		name := cmpOr(x.GetSkill(), x.GetPlanName())
		if v := x.GetSkillVersion(); v > 0 {
			name = fmt.Sprintf("%s v%d", name, v)
		}
		rows = append(rows, row{ID: x.GetId(), Name: humantext.Escape(name), Requester: x.GetRequester(), Schedule: x.GetSchedule(),
			State: runStateWord(x.GetState()), Reason: humantext.Escape(x.GetStateReason()), Age: humantext.Age(x.GetCreatedAt().AsTime(), now), Open: x.GetOpenAsks()})
	}
	h.render(w, r, http.StatusOK, "runs", s, map[string]any{"Runs": rows, "ByHand": "its requester"})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func runStateWord(s tollgatev1.RunState) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.String(), "RUN_STATE_"), "_", " "))
}

// runPage is one run: its card, its steps in time order with their
// attempts, its asks, and each fan's wall clock, branch sum and longest
// branch drawn as bars (a fan that ran in parallel has a wall bar near
// its longest branch, far below the sum).
func (h *Handler) runPage(w http.ResponseWriter, r *http.Request) {
	s := h.signedIn(w, r)
	if s == nil {
		return
	}
	resp, err := h.cfg.API.GetRun(h.as(r.Context(), s, ""), &tollgatev1.GetRunRequest{RunId: r.PathValue("run")})
	if err != nil {
		h.fail(w, r, httpStatus(err), s, apiMessage(err))
		return
	}
	h.render(w, r, http.StatusOK, "run", s, h.runView(resp.GetRun()))
}

// linkView is a single-use link as its page shows it.
type linkView struct {
	Token, ID, Person string
	Expires           string
	UsedBy, UsedAt    string
	UsedKind          string
}

// linkPage opens a link: it shows the packet to the person it names, and
// never decides (a link scanner that follows it changes nothing). Unless
// links sign in (Config.LinkSignsIn), the holder signs in first, as that
// person.
func (h *Handler) linkPage(w http.ResponseWriter, r *http.Request) {
	lk, s, ok := h.openLink(w, r)
	if !ok {
		return
	}
	h.showAsk(w, r, s, lk.askID, &lk.linkView, http.StatusOK, "")
}

// linkDecide is a decision from a link's page: the POST carries the CSRF
// token of the session (or link session) that opened it, and the
// decision records the link, so the engine refuses its second use.
func (h *Handler) linkDecide(w http.ResponseWriter, r *http.Request) {
	lk, s, ok := h.openLink(w, r)
	if !ok {
		return
	}
	if !h.checkCSRF(r, s) {
		h.showAsk(w, r, s, lk.askID, &lk.linkView, http.StatusForbidden, "This decision did not come from this link's own page (its form token is missing or wrong), so nothing was decided.")
		return
	}
	if lk.UsedBy != "" {
		h.showAsk(w, r, s, lk.askID, &lk.linkView, http.StatusConflict, lk.usedText())
		return
	}
	if s.Link != nil && strings.TrimSpace(r.PostFormValue("decision")) == "standing" {
		// A link alone is for its one ask: a standing approval approves
		// later asks too, for as long as its holder says, so it needs the
		// person signed in (a forwarded email must not grant one).
		h.showAsk(w, r, s, lk.askID, &lk.linkView, http.StatusForbidden, "A standing approval approves later asks too, so a link alone cannot grant one; nothing was decided. Sign in and grant it from the ask's page.")
		return
	}
	h.decideAs(w, r, s, lk.askID, &lk.linkView)
}

type openedLink struct {
	linkView
	askID string
}

func (l *linkView) usedText() string {
	return fmt.Sprintf("This link was already used: %s made a decision (%s) through it at %s. A link decides once; open the ask from your inbox to see where it stands.", l.UsedBy, l.UsedKind, l.UsedAt)
}

// openLink checks a link and who holds it: its signature and expiry, the
// person signed in (it must be the person the link names), or — where
// links sign in — a session for that person and that ask alone. It also
// says whether the link was used.
func (h *Handler) openLink(w http.ResponseWriter, r *http.Request) (openedLink, *session, bool) {
	tok := r.PathValue("token")
	l, err := h.keys.parseLink(tok, h.cfg.Now())
	if err != nil {
		h.fail(w, r, http.StatusGone, h.session(r), err.Error())
		return openedLink{}, nil, false
	}
	s := h.session(r)
	switch {
	case s != nil && s.Subject != l.Person:
		h.fail(w, r, http.StatusForbidden, s, fmt.Sprintf("This link is for %s; you are signed in as %s. Sign out and sign in as %s, or open the ask from your own inbox.", l.Person, s.Subject, l.Person))
		return openedLink{}, nil, false
	case s == nil && !h.cfg.LinkSignsIn:
		h.needSignin(w, r)
		return openedLink{}, nil, false
	case s == nil:
		// The link alone lets its person see and decide its one ask.
		s = &session{ID: l.ID, Subject: l.Person, Kind: "person", Issuer: "tollgate-link", Link: &l}
	}
	out := openedLink{linkView: linkView{Token: tok, ID: l.ID, Person: l.Person, Expires: time.Unix(l.Expires, 0).UTC().Format("2006-01-02 15:04 MST")}, askID: l.Ask}
	resp, err := h.cfg.API.GetAsk(h.as(r.Context(), s, ""), &tollgatev1.GetAskRequest{AskId: l.Ask})
	if err != nil {
		h.fail(w, r, httpStatus(err), s, apiMessage(err))
		return openedLink{}, nil, false
	}
	out.used(resp.GetAsk(), l.ID)
	// An ask asked again after going stale keeps its id; its earlier
	// rounds are ask~1, ask~2, … A link used on one of them is used (the
	// engine refuses its second use whatever this page says).
	for n := 1; out.UsedBy == "" && n <= maxRounds; n++ {
		prev, err := h.cfg.API.GetAsk(h.as(r.Context(), s, ""), &tollgatev1.GetAskRequest{AskId: fmt.Sprintf("%s~%d", l.Ask, n)})
		if err != nil {
			break
		}
		out.used(prev.GetAsk(), l.ID)
	}
	return out, s, true
}

// maxRounds bounds how many earlier rounds of a link's ask its page reads.
const maxRounds = 32

// used records the decision made through link id on a, if any.
func (l *openedLink) used(a *tollgatev1.Ask, id string) {
	for _, d := range a.GetDecisions() {
		if linkOf(d) == id {
			l.UsedBy, l.UsedAt, l.UsedKind = d.GetActor(), d.GetTime().AsTime().UTC().Format("2006-01-02 15:04:05 MST"), decisionWord(d.GetKind())
		}
	}
}

// linkOf is the link a decision was made through, as the API shows it
// (Decision.via "web link lnk_…").
func linkOf(d *tollgatev1.Decision) string {
	_, id, ok := strings.Cut(d.GetVia(), " link ")
	if !ok {
		return ""
	}
	return id
}

// render writes page name with data; every page gets the person and the
// CSRF token its forms carry.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name string, s *session, data any) {
	t := h.pages[name]
	v := map[string]any{"Data": data, "Path": r.URL.Path}
	if s != nil {
		v["Who"] = s.Subject
		v["Groups"] = s.Groups
		v["CSRF"] = h.csrfToken(s)
		v["LinkOnly"] = s.Link != nil
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, v); err != nil {
		h.cfg.Log.Error("web: render", "page", name, "error", err)
		http.Error(w, "could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// fail is a page that says what went wrong, with the status code.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, s *session, msg string) {
	h.render(w, r, code, "error", s, map[string]any{"Code": code, "Title": http.StatusText(code), "Message": humantext.Escape(msg)})
}
