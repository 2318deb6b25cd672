package emailnotify

import (
	"bytes"
	"fmt"
	"html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/humantext"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// NeverApproves is the sentence every link in a notice comes with.
const NeverApproves = "Opening this link never approves anything; you decide on the page."

// Bounds on what one message shows of the packet.
const (
	maxTitle    = 150 // runes of the title in Subject
	maxText     = 1000
	maxActions  = 5
	maxArgs     = 8
	maxArgValue = 200
)

// view is how one message about an ask is drawn, besides the packet.
type view struct {
	kind        string // webhook event kind
	person      string // whom it is sent to
	audience    string // whom the ask was routed to (Event.Audience)
	named       bool   // person is in Event.People
	now         time.Time
	link        string    // the person's single-use link ("" for none)
	linkExpires time.Time // when it stops working (at the latest)
	signIn      bool      // link is the ask's page behind sign-in, not a single-use link
}

// withLink reports whether the notice asks the person to act: opened,
// reminder, escalated. Decided and expired notices say how it ended.
func (v view) withLink() bool {
	return v.kind == webhook.KindOpened || v.kind == webhook.KindReminder || v.kind == webhook.KindEscalated
}

// content is what a message says, every text from others escaped
// (humantext.Escape) and clipped; the HTML template escapes it again
// for HTML.
type content struct {
	Heading     string
	Title       string
	Summary     string
	Actions     []actionLine
	MoreActions int
	Consequence string
	Requester   string
	Why         string
	Deadline    string
	Payload     string
	Quorum      int
	Outcome     string
	Link        string
	LinkNote    string
	Never       string
	AskID       string
}

type actionLine struct {
	Name   string // server·tool
	Amount string
	Args   []kv
	More   int
}

type kv struct{ K, V string }

// esc is s made safe to show (no control characters but newline and
// tab, no bidi overrides) and clipped to n runes.
func esc(s string, n int) string { return notice.Clip(humantext.Escape(s), n) }

// flat is s on one line: line and paragraph breaks and tabs become
// spaces (a title is one line, in the body as in Subject).
func flat(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\r', '\n', '\t', '\v', '\f', 0x85, '\u2028', '\u2029':
			return ' '
		}
		return r
	}, s)
}

// headerText is s for a header: on one line (every control character a
// space), clipped, and Q-encoded when it is not printable ASCII.
func headerText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || humantext.Unsafe(r) || r == '\u2028' || r == '\u2029' || r == 0x85 {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	return mime.QEncoding.Encode("utf-8", notice.Clip(s, n))
}

// need is what the ask asks of the person, in a word or three.
func need(ask *tollgatev1.Ask) string {
	switch ask.GetKind() {
	case tollgatev1.AskKind_ASK_KIND_CHOICE, tollgatev1.AskKind_ASK_KIND_TEXT:
		return "Answer needed"
	case tollgatev1.AskKind_ASK_KIND_IN_DOUBT:
		return "In doubt: say what happened"
	}
	return "Approval needed"
}

// subject is the Subject's words, before encoding.
func subject(ask *tollgatev1.Ask, v view) string {
	title := ask.GetTitle()
	if title == "" {
		title = ask.GetId()
	}
	switch v.kind {
	case webhook.KindReminder:
		return "Reminder: " + strings.ToLower(need(ask)[:1]) + need(ask)[1:] + ": " + title
	case webhook.KindEscalated:
		return "Escalated: " + title
	case webhook.KindDecided, webhook.KindExpired:
		return stateWord(ask.GetState()) + ": " + title
	}
	return need(ask) + ": " + title
}

func stateWord(s tollgatev1.AskState) string {
	w := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.String(), "ASK_STATE_"), "_", " "))
	if w == "" || w == "unspecified" {
		return "Closed"
	}
	return strings.ToUpper(w[:1]) + w[1:]
}

// build is what a message about ask says to v.person.
func build(ask *tollgatev1.Ask, v view) content {
	c := content{Title: esc(flat(ask.GetTitle()), 300), AskID: esc(ask.GetId(), 200), Never: NeverApproves}
	if c.Title == "" {
		c.Title = need(ask)
	}
	switch v.kind {
	case webhook.KindOpened:
		c.Heading = need(ask) + "."
	case webhook.KindReminder:
		c.Heading = "Reminder: this is still waiting for a decision."
	case webhook.KindEscalated:
		to := ask.GetEscalatedTo()
		if to == "" {
			to = v.audience
		}
		c.Heading = "Escalated."
		if to != "" {
			c.Heading = "Escalated to " + esc(to, 200) + "."
		}
	default:
		c.Heading = "How it ended."
	}
	acts := ask.GetActions()
	for i, a := range acts {
		if i == maxActions {
			c.MoreActions = len(acts) - maxActions
			break
		}
		l := actionLine{Name: esc(a.GetServer(), 100) + "·" + esc(a.GetTool(), 100), Amount: esc(amount(a.GetArgsJson()), 100)}
		l.Args, l.More = keyArgs(a.GetArgsJson())
		c.Actions = append(c.Actions, l)
	}
	c.Requester = esc(ask.GetRequester(), 200)
	c.Payload = esc(ask.GetPayloadDigest(), 100)
	if !v.withLink() {
		c.Outcome = outcome(ask)
		return c
	}
	c.Summary = esc(ask.GetSummary(), maxText)
	c.Consequence = esc(ask.GetConsequence(), maxText)
	c.Why = why(ask, v)
	if e := ask.GetExpiresAt(); e != nil {
		c.Deadline = humantext.Deadline(e.AsTime().UTC(), v.now.UTC()) + " UTC; on expiry " + plan.ExpiryOutcome(wire.OnExpiry(ask.GetOnExpiry())) + "."
	}
	if q := ask.GetQuorum(); q > 1 {
		c.Quorum = int(q)
	}
	if s := outcome(ask); s != "" {
		c.Outcome = s // approvals so far, evidence requested
	}
	if v.link != "" {
		c.Link = v.link
		if v.signIn {
			c.LinkNote = "Sign in to the inbox to open it."
		} else {
			c.LinkNote = "The link is for " + esc(v.person, 200) + " alone and works once"
			if !v.linkExpires.IsZero() {
				c.LinkNote += ", until " + v.linkExpires.UTC().Format("2006-01-02 15:04") + " UTC at the latest"
			}
			c.LinkNote += "; do not forward it."
		}
	}
	return c
}

// why says why the ask came to this person and who may decide it.
func why(ask *tollgatev1.Ask, v view) string {
	var parts []string
	switch {
	case v.person == v.audience && v.kind == webhook.KindEscalated:
		parts = append(parts, "it was escalated to you")
	case v.person == v.audience:
		parts = append(parts, "it was routed to you")
	case v.named && v.person == ask.GetRequester():
		parts = append(parts, "you asked for it")
	case v.named:
		parts = append(parts, "you are named on it as an approver")
	}
	if v.audience != "" && v.audience != v.person {
		parts = append(parts, "asked of "+esc(v.audience, 200))
	}
	if d := ask.GetAuthorityRequired().GetDescription(); d != "" {
		parts = append(parts, "who may decide: "+esc(d, 300))
	}
	return strings.Join(parts, "; ")
}

// outcome says who decided and when, or what else became of the ask
// (notice.Words.Ending), as a sentence; "" for an open ask nobody has
// approved yet.
func outcome(ask *tollgatev1.Ask) string {
	e := words.Ending(ask)
	if e.Text == "" || e.Quoted {
		return e.Text
	}
	return e.Text + "."
}

// words writes names and reasons escaped (esc), times in UTC as the
// record has them.
var words = notice.Words{Esc: esc, When: func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") + " UTC" }}

// keyArgs is an action's top-level args in key order, up to maxArgs,
// each escaped and clipped, and how many more there are.
func keyArgs(argsJSON string) ([]kv, int) {
	args, more := notice.Args(argsJSON, maxArgs)
	var out []kv
	for _, a := range args {
		out = append(out, kv{esc(a.Key, 60), esc(a.Value, maxArgValue)})
	}
	return out, more
}

// amount is the amount an action moves, with its currency, when its args
// say (notice.Amount); not escaped.
func amount(argsJSON string) string {
	amt, cur := notice.Amount(argsJSON)
	if amt == "" || cur == "" {
		return amt
	}
	return amt + " " + cur
}

// plainText is the text/plain part.
func plainText(c content) string {
	var b strings.Builder
	line := func(label, s string) {
		if s != "" {
			fmt.Fprintf(&b, "%s: %s\n", label, s)
		}
	}
	fmt.Fprintf(&b, "%s\n\n%s\n\n", c.Heading, c.Title)
	if c.Summary != "" {
		fmt.Fprintf(&b, "%s\n\n", c.Summary)
	}
	for _, a := range c.Actions {
		line("Action", a.Name)
		line("  Amount", a.Amount)
		for _, kv := range a.Args {
			fmt.Fprintf(&b, "  %s: %s\n", kv.K, kv.V)
		}
		if a.More > 0 {
			fmt.Fprintf(&b, "  …and %d more args (open the ask to see all)\n", a.More)
		}
	}
	if c.MoreActions > 0 {
		fmt.Fprintf(&b, "…and %d more actions (open the ask to see all)\n", c.MoreActions)
	}
	line("If approved", c.Consequence)
	line("Requested by", c.Requester)
	line("Why you", c.Why)
	line("Deadline", c.Deadline)
	line("Payload digest", c.Payload)
	if c.Quorum > 1 {
		fmt.Fprintf(&b, "Approvals needed: %d\n", c.Quorum)
	}
	line("Status", c.Outcome)
	line("Ask", c.AskID)
	if c.Link != "" {
		fmt.Fprintf(&b, "\nOpen it: %s\n%s\n%s\n", c.Link, c.Never, c.LinkNote)
	} else if c.Outcome != "" && c.Summary == "" {
		b.WriteString("\nNothing more is asked of you.\n")
	}
	return b.String()
}

// htmlPart is the text/html part: no images, no remote anything, no
// script; the template escapes every value.
var htmlPart = template.Must(template.New("mail").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body style="font-family: sans-serif; line-height: 1.4">
<p>{{.Heading}}</p>
<h1 style="font-size: 1.3em">{{.Title}}</h1>
{{with .Summary}}<p style="white-space: pre-wrap">{{.}}</p>{{end}}
<table cellpadding="4" style="border-collapse: collapse">
{{range .Actions}}<tr><th align="left" valign="top">Action</th><td><code>{{.Name}}</code>
{{with .Amount}}<br>Amount: <strong>{{.}}</strong>{{end}}
{{range .Args}}<br>{{.K}}: <code>{{.V}}</code>{{end}}
{{if .More}}<br>…and {{.More}} more args (open the ask to see all){{end}}</td></tr>
{{end}}{{if .MoreActions}}<tr><td colspan="2">…and {{.MoreActions}} more actions (open the ask to see all)</td></tr>
{{end}}{{with .Consequence}}<tr><th align="left" valign="top">If approved</th><td>{{.}}</td></tr>
{{end}}{{with .Requester}}<tr><th align="left" valign="top">Requested by</th><td>{{.}}</td></tr>
{{end}}{{with .Why}}<tr><th align="left" valign="top">Why you</th><td>{{.}}</td></tr>
{{end}}{{with .Deadline}}<tr><th align="left" valign="top">Deadline</th><td>{{.}}</td></tr>
{{end}}{{with .Payload}}<tr><th align="left" valign="top">Payload digest</th><td><code>{{.}}</code></td></tr>
{{end}}{{if gt .Quorum 1}}<tr><th align="left" valign="top">Approvals needed</th><td>{{.Quorum}}</td></tr>
{{end}}{{with .Outcome}}<tr><th align="left" valign="top">Status</th><td>{{.}}</td></tr>
{{end}}<tr><th align="left" valign="top">Ask</th><td><code>{{.AskID}}</code></td></tr>
</table>
{{if .Link}}<p><a href="{{.Link}}">Open it</a> ({{.Link}})</p>
<p><strong>{{.Never}}</strong> {{.LinkNote}}</p>
{{else if and .Outcome (not .Summary)}}<p>Nothing more is asked of you.</p>
{{end}}</body></html>
`))

// compose is the whole message, headers and body, with CRLF line ends.
func (n *Notifier) compose(ask *tollgatev1.Ask, v view, eventID, msgID, to string) ([]byte, error) {
	c := build(ask, v)
	var html bytes.Buffer
	if err := htmlPart.Execute(&html, c); err != nil {
		return nil, err
	}
	var msg bytes.Buffer
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, part := range []struct{ typ, text string }{{"text/plain", plainText(c)}, {"text/html", html.String()}} {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", part.typ+"; charset=utf-8")
		h.Set("Content-Transfer-Encoding", "quoted-printable")
		pw, err := mw.CreatePart(h)
		if err != nil {
			return nil, err
		}
		qw := quotedprintable.NewWriter(pw)
		if _, err := qw.Write([]byte(part.text)); err != nil {
			return nil, err
		}
		if err := qw.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	hdr := func(k, v string) { fmt.Fprintf(&msg, "%s: %s\r\n", k, v) }
	hdr("From", n.from.String())
	hdr("To", (&mail.Address{Address: to}).String())
	// Encoded words are folded onto lines of their own: the white space
	// between them is not part of the text.
	hdr("Subject", strings.ReplaceAll(headerText(subject(ask, v), maxTitle+40), "?= =?utf-8?q?", "?=\r\n =?utf-8?q?"))
	hdr("Date", v.now.Format(time.RFC1123Z))
	hdr("Message-ID", "<"+msgID+"@"+n.domain+">")
	hdr("Auto-Submitted", "auto-generated")
	if eventID != "" {
		hdr("X-Tollgate-Event", headerText(eventID, 400))
	}
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", `multipart/alternative; boundary="`+mw.Boundary()+`"`)
	msg.WriteString("\r\n")
	msg.Write(body.Bytes())
	return msg.Bytes(), nil
}
