package slackapp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// Slack's window for a request's timestamp, both ways.
const skew = 5 * time.Minute

// Issuer is the Principal.Issuer of a person who decides through Slack.
const Issuer = "slack"

// job is one verified click waiting for a worker.
type job struct {
	cb     slack.InteractionCallback
	action string // actionApprove or actionReject
	value  buttonValue
}

// Interactions is the interactivity endpoint (POST; Slack's "Request
// URL", e.g. /slack/interactions). A request is refused with 401 and
// changes nothing unless its X-Slack-Signature is Slack's v0 HMAC-SHA256
// of "v0:timestamp:body" under the signing secret, its
// X-Slack-Request-Timestamp is within five minutes of now, and its
// signature has not been accepted before (a replay). The body is capped
// at MaxBody (413). A verified Approve or Reject click is acknowledged at
// once (200, inside Slack's 3-second budget) and decided by a worker of
// Run, which answers through the interaction's response_url: the message
// redrawn to show who decided and when, or an ephemeral reply saying why
// nothing was decided. An Open click, or anything else, is acknowledged
// and does nothing. 503 when Run is not running, the queue is full, or
// the replay cache is full of live signatures.
func (a *App) Interactions() http.Handler { return http.HandlerFunc(a.serveInteraction) }

func (a *App) serveInteraction(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if a.secret == "" || !a.running.Load() {
		http.Error(w, "not accepting interactions", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "unreadable request", http.StatusBadRequest)
		return
	}
	sig, ts, err := a.verify(r.Header, body)
	if err != nil {
		a.cfg.Log.Warn("slack interaction refused", "reason", err.Error(), "remote", r.RemoteAddr)
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	// The one bounded replay cache (pkg/webhook's): a signature is
	// remembered until its timestamp leaves the window; full of live
	// ones, it takes no more (fails closed) rather than forget one.
	seen, err := a.replay.MarkSeen(r.Context(), sig, a.cfg.Now(), ts.Add(skew+time.Second))
	switch {
	case err != nil:
		a.cfg.Log.Warn("slack interaction refused", "reason", "replay cache full")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	case seen:
		a.cfg.Log.Warn("slack interaction refused", "reason", "replayed", "remote", r.RemoteAddr)
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		http.Error(w, "no payload", http.StatusBadRequest)
		return
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	j, ok := clicked(cb)
	if !ok {
		w.WriteHeader(http.StatusOK) // Open, or nothing of ours: acknowledged, nothing done
		return
	}
	select {
	case a.jobs <- j:
		w.WriteHeader(http.StatusOK)
	default:
		a.cfg.Log.Warn("slack interaction refused", "reason", "queue full")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}
}

// verify checks Slack's signature (slack-go's SecretsVerifier: v0,
// HMAC-SHA256, five minutes of skew by the wall clock) and the
// timestamp again by Config.Now, and returns the signature's bytes (the
// replay key: hex case cannot make a second key for one signature) and
// the request's time.
func (a *App) verify(h http.Header, body []byte) (string, time.Time, error) {
	sv, err := slack.NewSecretsVerifier(h, a.secret)
	if err != nil {
		return "", time.Time{}, err
	}
	if _, err := sv.Write(body); err != nil {
		return "", time.Time{}, err
	}
	if err := sv.Ensure(); err != nil {
		return "", time.Time{}, err
	}
	secs, err := strconv.ParseInt(h.Get("X-Slack-Request-Timestamp"), 10, 64)
	if err != nil {
		return "", time.Time{}, err
	}
	ts := time.Unix(secs, 0)
	if d := a.cfg.Now().Sub(ts); d > skew || d < -skew {
		return "", time.Time{}, slack.ErrExpiredTimestamp
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(h.Get("X-Slack-Signature"), "v0="))
	if err != nil {
		return "", time.Time{}, err
	}
	return string(raw), ts, nil
}

// clicked is the Approve or Reject click cb carries, if any.
func clicked(cb slack.InteractionCallback) (job, bool) {
	if cb.Type != slack.InteractionTypeBlockActions {
		return job{}, false
	}
	for _, act := range cb.ActionCallback.BlockActions {
		if act == nil || (act.ActionID != actionApprove && act.ActionID != actionReject) {
			continue
		}
		var v buttonValue
		if json.Unmarshal([]byte(act.Value), &v) != nil || v.Ask == "" {
			continue
		}
		if act.ActionID == actionApprove && v.Option == "" {
			continue
		}
		return job{cb: cb, action: act.ActionID, value: v}, true
	}
	return job{}, false
}

// Run works the interactions Interactions accepted, Workers at a time,
// until ctx ends; then it waits for the clicks under way (each bounded
// by DecideTimeout) and returns. Clicks still queued then are dropped
// (logged): their people see no answer and may click again. Interactions
// answers 503 while Run is not running.
func (a *App) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("slackapp: Run is already running")
	}
	var wg sync.WaitGroup
	for range a.cfg.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-a.jobs:
					a.process(ctx, j)
				}
			}
		})
	}
	<-ctx.Done()
	a.running.Store(false)
	wg.Wait()
	for {
		select {
		case j := <-a.jobs:
			a.cfg.Log.Warn("slack interaction dropped at shutdown", "ask", j.value.Ask, "user", j.cb.User.ID)
		default:
			return nil
		}
	}
}

// process decides one click as the person the Slack user maps to, and
// answers in Slack.
func (a *App) process(parent context.Context, j job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), a.cfg.DecideTimeout)
	defer cancel()
	person := a.person(ctx, j.cb)
	if person == "" {
		a.cfg.Log.Info("slack click from an unlinked user: not decided", "user", j.cb.User.ID, "team", j.cb.Team.ID, "ask", j.value.Ask)
		a.reply(ctx, j.cb, false, "Your Slack account is not linked to a Tollgate identity, so it cannot decide here. Nothing was decided.", nil)
		return
	}
	req := &tollgatev1.DecideRequest{AskId: j.value.Ask, ExpectedPayloadDigest: j.value.Payload, ExpectedEvidenceDigest: j.value.Evidence}
	if j.action == actionApprove {
		req.Decision = &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: j.value.Option}}
	} else {
		req.Decision = &tollgatev1.DecideRequest_Reject{Reject: &tollgatev1.Reject{Reason: "rejected in Slack by " + person}}
	}
	dctx := api.As(ctx, identity.Principal{Subject: person, Kind: identity.KindPerson, Issuer: Issuer}, api.Via{Surface: api.SurfaceSlack})
	resp, err := a.cfg.Decider.Decide(dctx, req)
	if err != nil {
		a.cfg.Log.Info("slack click not decided", "person", person, "ask", j.value.Ask, "code", status.Code(err).String())
		a.reply(ctx, j.cb, false, refusal(err), nil)
		return
	}
	a.cfg.Log.Info("decided through slack", "person", person, "ask", j.value.Ask, "action", j.action)
	ask := resp.GetAsk()
	if ask == nil { // cannot happen: Decide returns the ask after the decision
		a.reply(ctx, j.cb, false, "Recorded. Open the ask to see it.", nil)
		return
	}
	var openURL string
	if a.cfg.Linker != nil {
		openURL = a.cfg.Linker.AskURL(ask.GetId())
	}
	text, blocks := render(ask, view{openURL: openURL})
	a.reply(ctx, j.cb, true, text, blocks)
}

// person is the Tollgate person a click's Slack user is: from Users, or
// — with EmailIsPerson — from a confirmed email of a live, human member
// of the workspace. "" when none.
func (a *App) person(ctx context.Context, cb slack.InteractionCallback) string {
	uid := cb.User.ID
	if uid == "" || (a.cfg.TeamID != "" && cb.Team.ID != a.cfg.TeamID) {
		return ""
	}
	if p, ok := a.cfg.Users[uid]; ok {
		return p
	}
	if !a.cfg.EmailIsPerson {
		return ""
	}
	u, err := a.api.GetUserInfoContext(ctx, uid)
	if err != nil {
		a.cfg.Log.Warn("slack: users.info failed; the user is treated as unlinked", "user", uid, "error", err)
		return ""
	}
	if u.ID != uid || u.Deleted || u.IsBot || u.IsStranger || !u.IsEmailConfirmed || u.Profile.Email == "" {
		return ""
	}
	if a.cfg.TeamID != "" && u.TeamID != a.cfg.TeamID {
		return ""
	}
	return strings.ToLower(u.Profile.Email)
}

// refusal is what a person is told when Decide refused their click: the
// server's reason, and what to do.
func refusal(err error) string {
	st := status.Convert(err)
	msg := esc(st.Message())
	switch st.Code() {
	case codes.PermissionDenied:
		return "Not decided: " + msg
	case codes.FailedPrecondition:
		return "Not decided: " + msg + "\nIf the ask changed since this message was posted, open it to see it as it is now; nothing other than what a message shows is ever approved."
	case codes.NotFound:
		return "Not decided: this ask does not exist, or you may not see it."
	case codes.InvalidArgument, codes.AlreadyExists, codes.Aborted, codes.OutOfRange:
		return "Not decided: " + msg
	}
	return "The control plane could not confirm your decision (" + st.Code().String() + "). It may not have been recorded: open the ask to see where it stands."
}

// reply answers a click: replace redraws the message it came from (the
// same for everyone), else an ephemeral message goes to the clicker
// alone. Through the click's response_url when it is Slack's (or on the
// API URL's host); else with chat.update or chat.postEphemeral.
func (a *App) reply(ctx context.Context, cb slack.InteractionCallback, replace bool, text string, blocks []slack.Block) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if blocks != nil {
		opts = append(opts, slack.MsgOptionBlocks(blocks...))
	}
	var err error
	switch channel := cb.Container.ChannelID; {
	case a.responseURLOK(cb.ResponseURL) && replace:
		_, _, _, err = a.api.SendMessageContext(ctx, "", append(opts, slack.MsgOptionReplaceOriginal(cb.ResponseURL))...)
	case a.responseURLOK(cb.ResponseURL):
		_, _, _, err = a.api.SendMessageContext(ctx, "", append(opts, slack.MsgOptionResponseURL(cb.ResponseURL, slack.ResponseTypeEphemeral))...)
	case channel == "":
		err = errors.New("no response_url and no channel to answer in")
	case replace:
		_, _, _, err = a.api.UpdateMessageContext(ctx, channel, cb.Container.MessageTs, opts...)
	default:
		_, err = a.api.PostEphemeralContext(ctx, channel, cb.User.ID, opts...)
	}
	if err != nil {
		a.cfg.Log.Warn("slack: could not answer a click", "user", cb.User.ID, "error", err)
	}
}

// responseURLOK reports whether u may be posted to: https on
// hooks.slack.com, or the API URL's own scheme and host (a test
// stand-in). A signed payload names it, but nothing is sent to a host
// Slack does not own.
func (a *App) responseURLOK(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.User != nil {
		return false
	}
	if p.Scheme == "https" && strings.EqualFold(p.Hostname(), "hooks.slack.com") && (p.Port() == "" || p.Port() == "443") {
		return true
	}
	return p.Scheme == a.apiURL.Scheme && strings.EqualFold(p.Host, a.apiURL.Host)
}
