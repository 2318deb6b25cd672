package approvectl

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func newAsksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "asks",
		Short: "Your inbox: the pending asks you may decide",
		Long: `Your inbox: the pending asks you may decide, oldest first as the server
orders them, each with how long it has been open (45m, 3h, 2d), its
deadline (in your local time, and relative: "in 5h", or "overdue 10m" for
one whose deadline passed and that no reader has expired yet) and why it
is yours to decide, and what its deadline does to the run. -o json prints
the same: opened_at, expires_at, wait_ms (open for, in milliseconds), why
and on_expiry for each.`,
		Example: `  approvectl --as dave asks
  approvectl --as dave asks -o json | jq -r '.asks[] | select(.wait_ms > 3600000) | .ask_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.ListAsksResponse, error) {
				return c.approvals.ListAsks(ctx, &tollgatev1.ListAsksRequest{})
			}, func(resp *tollgatev1.ListAsksResponse) any {
				type inboxJSON struct {
					askJSON
					Why      string `json:"why"`
					OnExpiry string `json:"on_expiry"` // what the deadline does, in the card's words
				}
				out := struct {
					Asks []inboxJSON `json:"asks"`
				}{Asks: []inboxJSON{}}
				now := g.cfg.Now()
				for _, it := range resp.GetItems() {
					out.Asks = append(out.Asks, inboxJSON{askJSON: askSummaryJSON(it.GetAsk(), now), Why: it.GetWhy(),
						OnExpiry: plan.ExpiryOutcome(wire.OnExpiry(it.GetAsk().GetOnExpiry()))})
				}
				return out
			}, func(w io.Writer, resp *tollgatev1.ListAsksResponse) error {
				return writeInbox(w, resp.GetItems(), g.cfg.Now(), time.Local)
			})
		},
	}
	cmd.AddCommand(newAskShowCmd(g))
	return cmd
}

func newAskShowCmd(g *globals) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "show ASK [--full]",
		Short: "Show an ask's decision packet: what exactly you would approve",
		Long: `show prints an ask's whole decision packet: the question and its summary,
the exact actions and their payload digest, every artifact you are shown
with its content, the facts checked before the approval is used, what
changed, what you may amend and its value now, who may decide and why,
and the deadline ladder.

An artifact's content above 64 KiB is cut, and says so; --full prints all
of it. A step output is JSON: a JSON string is printed as its text, other
JSON indented; -o json has the exact bytes.

-o json emits all of it. evidence[].content is the artifact's bytes as
text (content_base64 instead when they are not UTF-8), evidence[].digest
is "sha256:" + hex SHA-256 of the whole content, and evidence_digest, what
an approval binds, is "sha256:" + hex SHA-256 of one line per artifact,
in order: REF + "|" + NAME + "=" + DIGEST + "\n" (ref is the show:
reference, empty for an attached file; name is the file name, empty for a
show: reference). approve --payload and --evidence take payload_digest and
evidence_digest.`,
		Example: `  approvectl --as bob asks show r_k2v8…/ask_1
  approvectl --as bob asks show r_k2v8…/ask_1 -o json | jq -r .payload_digest`,
		Args: askArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.GetAskResponse, error) {
				return c.approvals.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: args[0], FullContent: full})
			}, func(resp *tollgatev1.GetAskResponse) any {
				return packetOf(resp, g.cfg.Now())
			}, func(w io.Writer, resp *tollgatev1.GetAskResponse) error {
				writePacket(w, resp, g.cfg.Now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "print every artifact's content whole, however large")
	return cmd
}

// packetJSON is the whole decision packet for scripts.
type packetJSON struct {
	askJSON
	Kind            string            `json:"kind"`
	StoppingPoint   string            `json:"stopping_point_id,omitempty"`
	Summary         string            `json:"summary"`
	Consequence     string            `json:"consequence"`
	StateReason     string            `json:"state_reason,omitempty"`
	Requester       string            `json:"requester"`
	Actions         []actionJSON      `json:"actions"`
	PayloadDigest   string            `json:"payload_digest"`
	EvidenceDigest  string            `json:"evidence_digest"`
	Evidence        []artifactJSON    `json:"evidence"`
	ResourceVersion string            `json:"resource_version,omitempty"`
	Facts           map[string]string `json:"facts_checked,omitempty"`
	Changes         []string          `json:"changes"`
	Amendable       []amendableJSON   `json:"amendable"`
	Authority       *authorityJSON    `json:"authority,omitempty"`
	Quorum          int               `json:"quorum"`
	PolicyVersion   string            `json:"policy_version,omitempty"`
	EscalatedTo     string            `json:"escalated_to,omitempty"`
	Ladder          []rungJSON        `json:"ladder"`
	Options         []optionJSON      `json:"options"`
	Decisions       []packetDecision  `json:"decisions"`
	MayDecide       bool              `json:"may_decide"`
	Why             string            `json:"why"`
}

type actionJSON struct {
	Step          string          `json:"step_id"`
	Server        string          `json:"server"`
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args"`
	PayloadDigest string          `json:"payload_digest"`
}

type artifactJSON struct {
	Ref        string `json:"ref"`
	Name       string `json:"name"`
	MediaType  string `json:"media_type"`
	Digest     string `json:"digest"`
	Size       int64  `json:"size"`
	Truncated  bool   `json:"truncated"`
	Note       string `json:"note,omitempty"`
	Content    string `json:"content"`
	Base64     string `json:"content_base64,omitempty"`
	StepID     string `json:"step_id,omitempty"`
	AttachedBy string `json:"attached_by,omitempty"`
}

type amendableJSON struct {
	Field string `json:"field"`
	Min   int64  `json:"min"`
	Max   int64  `json:"max"`
	Now   string `json:"value_now,omitempty"`
}

type authorityJSON struct {
	Description string   `json:"description"`
	Roles       []string `json:"roles,omitempty"`
	Principals  []string `json:"principals,omitempty"`
	Quorum      int      `json:"quorum"`
	Excluded    []string `json:"excluded,omitempty"`
	PolicyRule  string   `json:"policy_rule,omitempty"`
}

type rungJSON struct {
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	To   string    `json:"to,omitempty"`
	Done bool      `json:"done"`
}

type optionJSON struct {
	ID       string `json:"id"`
	Label    string `json:"label"`
	Proceeds bool   `json:"proceeds"`
}

type packetDecision struct {
	decisionJSON
	Authority     string `json:"authority,omitempty"`
	PayloadDigest string `json:"payload_digest,omitempty"`
	AmendField    string `json:"amend_field,omitempty"`
	AmendValue    string `json:"amend_value,omitempty"`
	AmendedDigest string `json:"amended_payload_digest,omitempty"`
	Via           string `json:"via,omitempty"` // the surface it came through: api, web, slack, "web link lnk_…"
}

// packetOf is the packet of resp for scripts; now is the clock the ask
// waits against.
func packetOf(resp *tollgatev1.GetAskResponse, now time.Time) packetJSON {
	a := resp.GetAsk()
	out := packetJSON{askJSON: askHeadJSON(a, now), Kind: enumWord(a.GetKind().String(), "ASK_KIND_"), StoppingPoint: a.GetStoppingPointId(),
		Summary: a.GetSummary(), Consequence: a.GetConsequence(), StateReason: a.GetStateReason(), Requester: a.GetRequester(),
		Actions: []actionJSON{}, PayloadDigest: a.GetPayloadDigest(), EvidenceDigest: a.GetEvidenceDigest(), Evidence: []artifactJSON{},
		ResourceVersion: a.GetResourceVersion(), Facts: a.GetMaterialFields(), Changes: append([]string{}, a.GetChanges()...),
		Amendable: []amendableJSON{}, Quorum: int(a.GetQuorum()), PolicyVersion: a.GetPolicyVersion(), EscalatedTo: a.GetEscalatedTo(),
		Ladder: []rungJSON{}, Options: []optionJSON{}, Decisions: []packetDecision{}, MayDecide: resp.GetMayDecide(), Why: resp.GetWhy()}
	for _, act := range a.GetActions() {
		args := json.RawMessage(act.GetArgsJson())
		if !json.Valid(args) {
			args, _ = json.Marshal(act.GetArgsJson())
		}
		out.Actions = append(out.Actions, actionJSON{Step: act.GetStepId(), Server: act.GetServer(), Tool: act.GetTool(), Args: args, PayloadDigest: act.GetPayloadDigest()})
	}
	for _, e := range a.GetEvidence() {
		aj := artifactJSON{Ref: e.GetRef(), Name: e.GetName(), MediaType: e.GetMediaType(), Digest: e.GetDigest(), Size: e.GetSize(),
			Truncated: e.GetTruncated(), Note: e.GetNote(), StepID: e.GetStepId(), AttachedBy: e.GetAttachedBy()}
		if b := e.GetContent(); utf8.Valid(b) {
			aj.Content = string(b)
		} else {
			aj.Base64 = base64.StdEncoding.EncodeToString(b)
		}
		out.Evidence = append(out.Evidence, aj)
	}
	for _, b := range a.GetAmendable() {
		out.Amendable = append(out.Amendable, amendableJSON{Field: b.GetField(), Min: b.GetMin(), Max: b.GetMax(), Now: a.GetAmendableValues()[b.GetField()]})
	}
	if r := a.GetAuthorityRequired(); r != nil {
		out.Authority = &authorityJSON{Description: r.GetDescription(), Roles: r.GetRoles(), Principals: r.GetPrincipals(), Quorum: int(r.GetQuorum()),
			Excluded: r.GetExcluded(), PolicyRule: r.GetPolicyRule()}
	}
	for _, r := range a.GetLadder() {
		out.Ladder = append(out.Ladder, rungJSON{Kind: r.GetKind(), At: tsTime(r.GetAt()), To: r.GetTo(), Done: r.GetDone()})
	}
	for _, o := range a.GetOptions() {
		out.Options = append(out.Options, optionJSON{ID: o.GetId(), Label: o.GetLabel(), Proceeds: o.GetProceeds()})
	}
	for _, d := range a.GetDecisions() {
		out.Decisions = append(out.Decisions, packetDecision{decisionJSON: decisionJSON{Kind: decisionWord(d), Actor: d.GetActor(),
			Time: d.GetTime().AsTime(), Option: d.GetOptionId(), Reason: d.GetReason(), Text: d.GetAnswerText()},
			Authority: d.GetAuthority(), PayloadDigest: d.GetPayloadDigest(), AmendField: d.GetAmendField(), AmendValue: d.GetAmendValueJson(),
			AmendedDigest: d.GetAmendedPayloadDigest(), Via: d.GetVia()})
	}
	return out
}

// writePacket prints an ask's decision packet for the person who may
// decide it; now is the clock its ladder is read against.
func writePacket(w io.Writer, resp *tollgatev1.GetAskResponse, now time.Time) {
	w = escaped{w} // the packet quotes others' words
	a := resp.GetAsk()
	fmt.Fprintf(w, "%s  %s\n  %s\n", a.GetId(), askWord(a.GetState()), a.GetTitle())
	if s := a.GetSummary(); s != "" {
		fmt.Fprintf(w, "  summary: %s\n", s)
	}
	fmt.Fprintf(w, "  requested by %s · opened %s · expires %s\n", a.GetRequester(), a.GetCreatedAt().AsTime().Format(time.RFC3339), deadlineText(a.GetExpiresAt().AsTime(), now))
	fmt.Fprintf(w, "  %s\n", a.GetConsequence())
	for _, act := range a.GetActions() {
		fmt.Fprintf(w, "  action %s: %s·%s %s\n    payload %s\n", act.GetStepId(), act.GetServer(), act.GetTool(), act.GetArgsJson(), act.GetPayloadDigest())
	}
	if d := a.GetPayloadDigest(); d != "" && len(a.GetActions()) > 1 {
		fmt.Fprintf(w, "  payload digest (all actions): %s\n", d)
	}
	if r := a.GetStateReason(); r != "" {
		fmt.Fprintf(w, "  %s\n", r)
	}
	if ev := a.GetEvidence(); len(ev) > 0 {
		fmt.Fprintf(w, "  evidence you are shown (%s):\n", a.GetEvidenceDigest())
		for _, e := range ev {
			writeArtifact(w, e)
		}
	}
	if len(a.GetMaterialFields()) > 0 {
		fmt.Fprintf(w, "  facts checked before it is used (%s):\n", a.GetResourceVersion())
		for _, f := range slices.Sorted(maps.Keys(a.GetMaterialFields())) {
			fmt.Fprintf(w, "    %s = %s\n", f, a.GetMaterialFields()[f])
		}
	}
	for _, c := range a.GetChanges() {
		fmt.Fprintf(w, "  changed: %s\n", c)
	}
	for _, b := range a.GetAmendable() {
		now := ""
		if v := a.GetAmendableValues()[b.GetField()]; v != "" {
			now = ", now " + v
		}
		fmt.Fprintf(w, "  amendable: %s between %d and %d%s (approvectl amend %s %s N)\n", b.GetField(), b.GetMin(), b.GetMax(), now, a.GetId(), b.GetField())
	}
	if req := a.GetAuthorityRequired(); req != nil {
		fmt.Fprintf(w, "  decided by %s; %d approval(s) needed", req.GetDescription(), req.GetQuorum())
		if len(req.GetRoles()) > 0 {
			fmt.Fprintf(w, "; roles: %s", strings.Join(req.GetRoles(), ", "))
		}
		if len(req.GetPrincipals()) > 0 {
			fmt.Fprintf(w, "; who may: %s", strings.Join(req.GetPrincipals(), ", "))
		}
		if len(req.GetExcluded()) > 0 {
			fmt.Fprintf(w, "; never: %s (separation of duties)", strings.Join(req.GetExcluded(), ", "))
		}
		if r := req.GetPolicyRule(); r != "" {
			fmt.Fprintf(w, "; rule %s", r)
		}
		fmt.Fprintln(w)
	}
	if to := a.GetEscalatedTo(); to != "" {
		fmt.Fprintf(w, "  escalated to %s\n", to)
	}
	for _, r := range a.GetLadder() {
		fmt.Fprintf(w, "  %s\n", rungText(r, now))
	}
	for _, o := range a.GetOptions() {
		fmt.Fprintf(w, "  %s) %s\n", o.GetId(), o.GetLabel())
	}
	for _, d := range a.GetDecisions() {
		via := ""
		if v := d.GetVia(); v != "" {
			via = " (" + v + ")"
		}
		fmt.Fprintf(w, "  %s by %s at %s%s %s\n", enumWord(d.GetKind().String(), "DECISION_KIND_"), d.GetActor(), d.GetTime().AsTime().Format(time.RFC3339), via, d.GetReason())
		if d.GetAuthority() != "" {
			fmt.Fprintf(w, "    authority: %s\n", d.GetAuthority())
		}
	}
	may := "you may not decide it: "
	if resp.GetMayDecide() {
		may = "you may decide it: "
	}
	fmt.Fprintf(w, "  %s%s\n", may, resp.GetWhy())
	if a.GetAnswerCommand() != "" {
		fmt.Fprintf(w, "  answer: %s\n", a.GetAnswerCommand())
	}
}

// rungText is a rung of the deadline ladder in words.
func rungText(r *tollgatev1.LadderRung, now time.Time) string {
	at := r.GetAt().AsTime()
	when := deadlineText(at, now)
	if r.GetDone() {
		when = at.Format("2006-01-02 15:04") + " (done)"
	}
	switch r.GetKind() {
	case "remind":
		return fmt.Sprintf("ladder: remind %s at %s", r.GetTo(), when)
	case "escalate":
		return fmt.Sprintf("ladder: escalate to %s at %s", r.GetTo(), when)
	}
	on := r.GetTo() // "expire" is the default: on expiry ""
	if on == "expire" {
		on = ""
	}
	return fmt.Sprintf("ladder: deadline at %s; %s", when, expiryPhrase(on))
}

// writeArtifact prints one artifact with its content, indented: text as
// it is, a JSON string as its text, other JSON indented; bytes that are
// not text are named, not printed.
func writeArtifact(w io.Writer, e *tollgatev1.EvidenceArtifact) {
	name := e.GetName()
	if e.GetRef() != "" {
		name = "{" + e.GetRef() + "}"
	}
	fmt.Fprintf(w, "    %s (%s, %s, %s)", name, e.GetMediaType(), sizeText(e.GetSize()), e.GetDigest())
	if by := e.GetAttachedBy(); by != "" {
		fmt.Fprintf(w, " attached by %s", by)
	}
	fmt.Fprintln(w, ":")
	b := e.GetContent()
	text := string(b)
	switch {
	case len(b) == 0 && e.GetNote() == "":
		text = "(empty)"
	case !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0:
		text = fmt.Sprintf("(not text: %d bytes; -o json has them as content_base64)", len(b))
	case e.GetMediaType() == "application/json" && !e.GetTruncated():
		var s string
		var ind bytes.Buffer
		if json.Unmarshal(b, &s) == nil {
			text = s
		} else if json.Indent(&ind, b, "", "  ") == nil {
			text = ind.String()
		}
	}
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(w, "      %s\n", l)
	}
	if n := e.GetNote(); n != "" {
		fmt.Fprintf(w, "      [%s]\n", n)
	}
}

// sizeText is a byte count for people.
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// writeInbox prints the inbox as a table: how long each ask has been open
// and its deadline, absolute in loc and relative to now.
func writeInbox(w io.Writer, items []*tollgatev1.InboxItem, now time.Time, loc *time.Location) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ASK\tTITLE\tOPEN\tDEADLINE\tON EXPIRY\tWHY YOU")
	for _, it := range items {
		a := it.GetAsk()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.GetId(), escapeControls(a.GetTitle()), age(a.GetCreatedAt().AsTime(), now),
			deadlineText(a.GetExpiresAt().AsTime().In(loc), now), plan.ExpiryOutcome(wire.OnExpiry(a.GetOnExpiry())), escapeControls(it.GetWhy()))
	}
	return tw.Flush()
}
