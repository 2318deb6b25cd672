package slackapp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
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

// esc makes s safe in mrkdwn: Slack's three control characters become
// entities, so nothing from a run can mention, link or format as Slack
// markup (a backtick could end a code span early: it becomes a prime).
func esc(s string) string {
	return strings.ReplaceAll(slackutilsx.EscapeMessage(s), "`", "ʹ")
}

// escClip is s escaped (plain_text too: Slack reads entities there) and
// clipped so the escaped text fits in n characters, never mid-entity.
func escClip(s string, n int) string {
	for m := n; m > 0; m -= 8 {
		if e := slackutilsx.EscapeMessage(clip(s, m)); utf8.RuneCountInString(e) <= n {
			return e
		}
	}
	return ""
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
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
		fmt.Fprintf(&b, "%s\n", esc(clip(s, 400)))
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
		fmt.Fprintf(&b, "*If approved:* %s\n", esc(clip(c, 400)))
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
	blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, clip(strings.TrimSpace(b.String()), maxSection), false, false), nil, nil))

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
				slack.NewTextBlockObject(slack.MarkdownType, clip(fmt.Sprintf("Approve *%s* with payload `%s`, exactly as shown? It is recorded with your name.", esc(clip(title, 200)), esc(shortDigest(ask.GetPayloadDigest()))), 300), false, false),
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

	text := "Approval needed: " + esc(clip(title, 200))
	if status != "" {
		text = esc(clip(title, 200)) + " — " + status
	}
	return text, blocks
}

func contextBlock(mrkdwn string) *slack.ContextBlock {
	return slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, clip(mrkdwn, maxSection), false, false))
}

// kindNote is the line that says why this message came now.
func kindNote(ask *tollgatev1.Ask, v view) string {
	switch v.kind {
	case "ask.reminder":
		return ":alarm_clock: Reminder: this is still waiting for a decision."
	case "ask.escalated":
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
		parts = append(parts, "who may decide: "+esc(clip(d, 300)))
	}
	return strings.Join(parts, " · ")
}

// onExpiry says what the deadline does.
func onExpiry(ask *tollgatev1.Ask) string {
	switch ask.GetOnExpiry() {
	case tollgatev1.OnExpiry_ON_EXPIRY_REJECT:
		return "if undecided, it expires and the run ends rejected; nothing it governs runs."
	case tollgatev1.OnExpiry_ON_EXPIRY_CANCEL:
		return "if undecided, it expires and the run is cancelled; nothing it governs runs."
	case tollgatev1.OnExpiry_ON_EXPIRY_ESCALATE:
		return "if undecided, it escalates once and waits again; it is never approved by default."
	}
	return "if undecided, it expires and the run ends expired; nothing it governs runs."
}

// keyArgs is a short view of an action's args: up to maxArgs keys in
// order, each value clipped.
func keyArgs(argsJSON string) string {
	args, keys := parseArgs(argsJSON)
	if len(keys) == 0 {
		return ""
	}
	var parts []string
	for i, k := range keys {
		if i == maxArgs {
			parts = append(parts, fmt.Sprintf("+%d more", len(keys)-maxArgs))
			break
		}
		parts = append(parts, esc(clip(k, 40))+"="+"`"+esc(clip(compact(args[k]), maxArgValue))+"`")
	}
	return strings.Join(parts, " ")
}

// amount is the amount an action moves, with its currency, when its args
// say: a top-level "amount" (or "*_amount") and "currency".
func amount(argsJSON string) string {
	args, keys := parseArgs(argsJSON)
	for _, k := range keys {
		if k == "amount" || strings.HasSuffix(k, "_amount") {
			amt := compact(args[k])
			if c, ok := args["currency"]; ok {
				var cur string
				if json.Unmarshal(c, &cur) == nil && cur != "" {
					return clip(amt, maxArgValue) + " " + clip(cur, 12)
				}
			}
			return clip(amt, maxArgValue)
		}
	}
	return ""
}

func parseArgs(argsJSON string) (map[string]json.RawMessage, []string) {
	var args map[string]json.RawMessage
	if json.Unmarshal([]byte(argsJSON), &args) != nil || len(args) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return args, keys
}

// compact is a JSON value as text: a string without its quotes.
func compact(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// openState reports whether ask still takes approve-or-reject decisions.
func openState(s tollgatev1.AskState) bool {
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
	if !openState(ask.GetState()) {
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
// of the ask; "" for an open ask nobody has approved yet.
func outcome(ask *tollgatev1.Ask) string {
	var approvers []string
	var last *tollgatev1.Decision
	var lastOf = map[tollgatev1.DecisionKind]*tollgatev1.Decision{}
	for _, d := range ask.GetDecisions() {
		lastOf[d.GetKind()] = d
		if d.GetKind() == tollgatev1.DecisionKind_DECISION_KIND_APPROVE && d.GetCounts() {
			if !slices.Contains(approvers, d.GetActor()) {
				approvers = append(approvers, d.GetActor())
			}
			last = d
		}
	}
	by := func(d *tollgatev1.Decision) string {
		return esc(d.GetActor()) + " at " + when(d.GetTime().AsTime())
	}
	approvedBy := func() string {
		names := make([]string, len(approvers))
		for i, a := range approvers {
			names[i] = esc(a)
		}
		return strings.Join(names, ", ") + " at " + when(last.GetTime().AsTime())
	}
	reason := func() string {
		if r := ask.GetStateReason(); r != "" {
			return ": " + esc(clip(r, 300))
		}
		return ""
	}
	closed := ""
	if c := ask.GetClosedAt(); c != nil {
		closed = " at " + when(c.AsTime())
	}
	switch ask.GetState() {
	case tollgatev1.AskState_ASK_STATE_APPROVED, tollgatev1.AskState_ASK_STATE_CONSUMED:
		if last != nil {
			return ":white_check_mark: Approved by " + approvedBy()
		}
		return ":white_check_mark: Approved" + closed
	case tollgatev1.AskState_ASK_STATE_REJECTED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_REJECT]; d != nil {
			return ":no_entry: Rejected by " + by(d) + ": " + esc(clip(d.GetReason(), 300))
		}
		return ":no_entry: Rejected" + closed + reason()
	case tollgatev1.AskState_ASK_STATE_ANSWERED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_ANSWER]; d != nil {
			return ":speech_balloon: Answered by " + by(d)
		}
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_APPROVE]; d != nil {
			return ":speech_balloon: Answered by " + by(d)
		}
		return ":speech_balloon: Answered" + closed
	case tollgatev1.AskState_ASK_STATE_EXPIRED:
		return ":hourglass: Expired undecided" + closed + reason()
	case tollgatev1.AskState_ASK_STATE_CANCELLED:
		return ":octagonal_sign: Cancelled" + closed + reason()
	case tollgatev1.AskState_ASK_STATE_STALE:
		return ":warning: Stale" + closed + reason() + " — it will be asked again"
	case tollgatev1.AskState_ASK_STATE_REVOKED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_REVOKE]; d != nil {
			return ":leftwards_arrow_with_hook: Approval revoked by " + by(d) + ": " + esc(clip(d.GetReason(), 300))
		}
		return ":leftwards_arrow_with_hook: Approval revoked" + closed + reason()
	case tollgatev1.AskState_ASK_STATE_IN_DOUBT:
		return ":grey_question: In doubt — open it to say what happened"
	case tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_REQUEST_EVIDENCE]; d != nil {
			return ":mag: Evidence requested by " + by(d) + ": " + esc(clip(d.GetEvidenceRequest(), 300))
		}
	}
	if last != nil {
		return fmt.Sprintf(":ballot_box_with_check: Approved by %s — %d of %d approvals so far", approvedBy(), len(approvers), max(ask.GetQuorum(), 1))
	}
	return ""
}
