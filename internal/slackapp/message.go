package slackapp

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/humantext"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Action ids of the message's buttons.
const (
	actionApprove = "tollgate.approve"
	actionReject  = "tollgate.reject"
	actionOpen    = "tollgate.open"
	blockActions  = "tollgate.actions"
)

// Slack's limits on what a message carries.
const (
	maxHeader      = 150
	maxSection     = 3000
	maxButtonValue = 2000
	maxURL         = 3000
	maxArgValue    = 80
	maxArgs        = 6
	maxActions     = 3
)

// buttonValue is what an Approve or Reject button carries: the ask and
// the digests of what the message showed, bound when it was drawn, so a
// click decides exactly that or nothing.
type buttonValue struct {
	Ask      string `json:"a"`
	Payload  string `json:"p,omitempty"`
	Evidence string `json:"e,omitempty"`
	Option   string `json:"o,omitempty"`
}

// view is how one message about an ask is drawn, besides the packet.
type view struct {
	kind     string // webhook event kind that caused it; "" for a redraw
	audience string // whom the ask was routed to (Event.Audience)
	openURL  string // the Open button's link; "" for none
}

// esc makes s safe in mrkdwn: control characters and bidi overrides are
// written as escapes (humantext.Escape: the text cannot reorder itself to
// show another payload beside an Approve button), and Slack's three
// control characters become entities, so nothing from a run can mention,
// link or format as Slack markup (a backtick could end a code span early:
// it becomes a prime).
func esc(s string) string {
	return strings.ReplaceAll(slackutilsx.EscapeMessage(humantext.Escape(s)), "`", "ʹ")
}

// escClip is s escaped (plain_text too: Slack reads entities there) and
// clipped so the escaped text fits in n characters, never mid-entity.
func escClip(s string, n int) string {
	for m := n; m > 0; m -= 8 {
		if e := slackutilsx.EscapeMessage(humantext.Escape(notice.Clip(s, m))); utf8.RuneCountInString(e) <= n {
			return e
		}
	}
	return ""
}

// shortDigest is "sha256:" and the first 12 hex digits.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12] + "…"
	}
	return d
}

// when formats t for a person in UTC, as the record has it.
func when(t time.Time) string {
	return t.UTC().Format("15:04 UTC on 2 Jan 2006")
}

// slackDate is t as Slack's date token (each reader sees their own time
// zone), with the UTC text as its fallback.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), when(t))
}

// render draws a message about ask: what it asks to do, for whom, until
// when, and — while it is open to an approve-or-reject decision — the
// buttons. Everything from the run is escaped. The plain text is the
// notification's fallback.
func render(ask *tollgatev1.Ask, v view) (string, []slack.Block) {
	var blocks []slack.Block
	title := ask.GetTitle()
	if title == "" {
		title = "Approval needed"
	}
	blocks = append(blocks, slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, escClip(title, maxHeader), false, false)))
	if note := kindNote(ask, v); note != "" {
		blocks = append(blocks, contextBlock(note))
	}

	var b strings.Builder
	if s := ask.GetSummary(); s != "" {
		fmt.Fprintf(&b, "%s\n", esc(notice.Clip(s, 400)))
	}
	acts := ask.GetActions()
	for i, a := range acts {
		if i == maxActions {
			fmt.Fprintf(&b, "…and %d more actions (Open to see all)\n", len(acts)-maxActions)
			break
		}
		fmt.Fprintf(&b, "*Action:* `%s·%s`", esc(a.GetServer()), esc(a.GetTool()))
		if args := keyArgs(a.GetArgsJson()); args != "" {
			fmt.Fprintf(&b, " %s", args)
		}
		b.WriteString("\n")
		if amt := amount(a.GetArgsJson()); amt != "" {
			fmt.Fprintf(&b, "*Amount:* %s\n", esc(amt))
		}
	}
	if c := ask.GetConsequence(); c != "" {
		fmt.Fprintf(&b, "*If approved:* %s\n", esc(notice.Clip(c, 400)))
	}
	if r := ask.GetRequester(); r != "" {
		fmt.Fprintf(&b, "*Requested by:* %s\n", esc(r))
	}
	if why := whyLine(ask, v.audience); why != "" {
		fmt.Fprintf(&b, "*Why you:* %s\n", why)
	}
	if exp := ask.GetExpiresAt(); exp != nil {
		fmt.Fprintf(&b, "*Deadline:* %s — %s\n", slackDate(exp.AsTime()), onExpiry(ask))
	}
	if d := ask.GetPayloadDigest(); d != "" {
		fmt.Fprintf(&b, "*Payload:* `%s`", esc(shortDigest(d)))
		if q := ask.GetQuorum(); q > 1 {
			fmt.Fprintf(&b, " · %d approvals needed", q)
		}
		b.WriteString("\n")
	}
	blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, notice.Clip(strings.TrimSpace(b.String()), maxSection), false, false), nil, nil))

	status := outcome(ask)
	if status != "" {
		blocks = append(blocks, contextBlock(status))
	}

	var buttons []slack.BlockElement
	if val, ok := decisionValue(ask); ok {
		approve := slack.NewButtonBlockElement(actionApprove, val, slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false)).
			WithStyle(slack.StylePrimary).
			WithConfirm(slack.NewConfirmationBlockObject(
				slack.NewTextBlockObject(slack.PlainTextType, "Approve?", false, false),
				slack.NewTextBlockObject(slack.MarkdownType, notice.Clip(fmt.Sprintf("Approve *%s* with payload `%s`, exactly as shown? It is recorded with your name.", esc(notice.Clip(title, 200)), esc(shortDigest(ask.GetPayloadDigest()))), 300), false, false),
				slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false),
				slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false)))
		reject := slack.NewButtonBlockElement(actionReject, val, slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false)).
			WithStyle(slack.StyleDanger).
			WithConfirm(slack.NewConfirmationBlockObject(
				slack.NewTextBlockObject(slack.PlainTextType, "Reject?", false, false),
				slack.NewTextBlockObject(slack.MarkdownType, "Reject it? The reason recorded is “rejected in Slack by” and your name; to give a reason of your own, use Open.", false, false),
				slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false),
				slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false)).WithStyle(slack.StyleDanger))
		buttons = append(buttons, approve, reject)
	}
	if v.openURL != "" && len(v.openURL) <= maxURL {
		buttons = append(buttons, slack.NewButtonBlockElement(actionOpen, "", slack.NewTextBlockObject(slack.PlainTextType, "Open", false, false)).WithURL(v.openURL))
	}
	if len(buttons) > 0 {
		blocks = append(blocks, slack.NewActionBlock(blockActions, buttons...))
	}

	text := "Approval needed: " + esc(notice.Clip(title, 200))
	if status != "" {
		text = esc(notice.Clip(title, 200)) + " — " + status
	}
	return text, blocks
}

func contextBlock(mrkdwn string) *slack.ContextBlock {
	return slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, notice.Clip(mrkdwn, maxSection), false, false))
}

// kindNote is the line that says why this message came now.
func kindNote(ask *tollgatev1.Ask, v view) string {
	switch v.kind {
	case webhook.KindReminder:
		return ":alarm_clock: Reminder: this is still waiting for a decision."
	case webhook.KindEscalated:
		to := ask.GetEscalatedTo()
		if to == "" {
			to = v.audience
		}
		if to == "" {
			return ":arrow_up: Escalated."
		}
		return ":arrow_up: Escalated to " + esc(to) + "."
	}
	return ""
}

// whyLine says why the ask came to this audience and who may decide it.
func whyLine(ask *tollgatev1.Ask, audience string) string {
	var parts []string
	if audience != "" {
		parts = append(parts, "asked of "+esc(audience))
	}
	if d := ask.GetAuthorityRequired().GetDescription(); d != "" {
		parts = append(parts, "who may decide: "+esc(notice.Clip(d, 300)))
	}
	return strings.Join(parts, " · ")
}

// onExpiry says what the deadline does, in the plan card's words
// (plan.ExpiryOutcome, as every surface says it).
func onExpiry(ask *tollgatev1.Ask) string {
	return "if undecided, " + plan.ExpiryOutcome(wire.OnExpiry(ask.GetOnExpiry())) + "; it is never approved by default."
}

// keyArgs is a short view of an action's args: up to maxArgs keys in
// order, each value clipped.
func keyArgs(argsJSON string) string {
	args, more := notice.Args(argsJSON, maxArgs)
	parts := make([]string, 0, len(args)+1)
	for _, a := range args {
		parts = append(parts, esc(notice.Clip(a.Key, 40))+"=`"+esc(notice.Clip(a.Value, maxArgValue))+"`")
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("+%d more", more))
	}
	return strings.Join(parts, " ")
}

// amount is the amount an action moves, with its currency, when its args
// say (notice.Amount), clipped; not escaped.
func amount(argsJSON string) string {
	amt, cur := notice.Amount(argsJSON)
	if amt == "" {
		return ""
	}
	if cur != "" {
		return notice.Clip(amt, maxArgValue) + " " + notice.Clip(cur, 12)
	}
	return notice.Clip(amt, maxArgValue)
}

// decidable reports whether an ask in state s still takes
// approve-or-reject decisions: pending or evidence requested (an ask in
// doubt waits for a person too, but for an account of what happened, on
// its page).
func decidable(s tollgatev1.AskState) bool {
	return s == tollgatev1.AskState_ASK_STATE_PENDING || s == tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED
}

// decisionValue is the Approve and Reject buttons' value, when the ask is
// an open approval with exactly one option that proceeds (anything else —
// a question, an in-doubt ask, a menu of several — is decided through
// Open).
func decisionValue(ask *tollgatev1.Ask) (string, bool) {
	switch ask.GetKind() {
	case tollgatev1.AskKind_ASK_KIND_APPROVAL, tollgatev1.AskKind_ASK_KIND_GATE:
	default:
		return "", false
	}
	if !decidable(ask.GetState()) {
		return "", false
	}
	var option string
	for _, o := range ask.GetOptions() {
		if o.GetProceeds() {
			if option != "" {
				return "", false
			}
			option = o.GetId()
		}
	}
	if option == "" {
		return "", false
	}
	raw, err := json.Marshal(buttonValue{Ask: ask.GetId(), Payload: ask.GetPayloadDigest(), Evidence: ask.GetEvidenceDigest(), Option: option})
	if err != nil || len(raw) > maxButtonValue {
		return "", false
	}
	return string(raw), true
}

// outcome is the line saying who decided and when, or what else became
// of the ask (notice.Words.Ending), after an emoji for it; "" for an open
// ask nobody has approved yet.
func outcome(ask *tollgatev1.Ask) string {
	if ask.GetState() == tollgatev1.AskState_ASK_STATE_IN_DOUBT {
		return ":grey_question: In doubt — open it to say what happened"
	}
	e := words.Ending(ask)
	if e.Text == "" {
		return ""
	}
	mark := marks[e.State]
	if e.SoFar || mark == "" {
		mark = ":ballot_box_with_check:"
	}
	return mark + " " + e.Text
}

// words writes names and reasons as mrkdwn, times as the record has them.
var words = notice.Words{Esc: func(s string, n int) string { return esc(notice.Clip(s, n)) }, When: when}

// marks are the emoji before an ending, by the state it tells of.
var marks = map[tollgatev1.AskState]string{
	tollgatev1.AskState_ASK_STATE_APPROVED:           ":white_check_mark:",
	tollgatev1.AskState_ASK_STATE_CONSUMED:           ":white_check_mark:",
	tollgatev1.AskState_ASK_STATE_REJECTED:           ":no_entry:",
	tollgatev1.AskState_ASK_STATE_ANSWERED:           ":speech_balloon:",
	tollgatev1.AskState_ASK_STATE_EXPIRED:            ":hourglass:",
	tollgatev1.AskState_ASK_STATE_CANCELLED:          ":octagonal_sign:",
	tollgatev1.AskState_ASK_STATE_STALE:              ":warning:",
	tollgatev1.AskState_ASK_STATE_REVOKED:            ":leftwards_arrow_with_hook:",
	tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED: ":mag:",
}
