package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/humantext"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Everything a page shows of another's words (titles, summaries, args,
// artifacts, reasons) goes through humantext.Escape before the template
// escapes it for HTML: a bidi override in a PR body could otherwise
// reorder what the approver reads.
func esc(s string) string { return humantext.Escape(s) }

// packetView is the ask page: the whole packet, and the forms the person
// may use.
type packetView struct {
	ID, RunID, Title, Summary, Consequence, Kind, State, StateReason string
	Requester, AgentOwner, ExecutingAgent                            string
	PayloadDigest, EvidenceDigest, ResourceVersion, PolicyVersion    string
	Deadline, OnExpiry                                               string
	Open, Overdue                                                    bool
	Quorum, Approvals                                                int
	Actions                                                          []actionView
	Evidence                                                         []artifactView
	Facts                                                            []kv
	Changes                                                          []string
	Ladder                                                           []rungView
	Authority                                                        authorityView
	Decisions                                                        []decisionView
	Amendable                                                        []amendView
	Approve                                                          []optionView // options that let the run go on
	Choices                                                          []optionView // a question's options
	TextAsk, InDoubt, Gate                                           bool
	MayDecide                                                        bool
	Why                                                              string
	Voted                                                            bool
	Action                                                           string // where the forms post
	Link                                                             *linkView
	Done, Error                                                      string
	Today                                                            string
}

type kv struct{ K, V string }

type actionView struct {
	Step, Server, Tool, Args, Digest string
	Fields                           []kv
}

type artifactView struct {
	Name, MediaType, Digest, Note, StepID, AttachedBy string
	Size                                              int64
	Text                                              string
	Lines                                             []diffLine // a diff, line by line
	Truncated                                         bool
}

type diffLine struct{ Class, Text string }

type rungView struct {
	Kind, At, To string
	Done         bool
}

type authorityView struct {
	Description, PolicyRule string
	Roles, People, Excluded []string
	Quorum                  int32
}

type decisionView struct {
	Kind, Actor, At, Reason, Option, Authority, Via, Digest string
	Counts                                                  bool
}

type amendView struct {
	Field, Now string
	Min, Max   int64
}

type optionView struct{ ID, Label string }

func (h *Handler) packet(resp *tollgatev1.GetAskResponse, s *session) packetView {
	a := resp.GetAsk()
	now := h.cfg.Now()
	exp := a.GetExpiresAt().AsTime()
	p := packetView{ID: a.GetId(), RunID: a.GetRunId(), Title: esc(a.GetTitle()), Summary: esc(a.GetSummary()), Consequence: esc(a.GetConsequence()),
		Kind: strings.ToLower(strings.TrimPrefix(a.GetKind().String(), "ASK_KIND_")), State: stateWord(a.GetState()), StateReason: esc(a.GetStateReason()),
		Requester: a.GetRequester(), AgentOwner: a.GetAgentOwner(), ExecutingAgent: a.GetExecutingAgent(),
		PayloadDigest: a.GetPayloadDigest(), EvidenceDigest: a.GetEvidenceDigest(), ResourceVersion: a.GetResourceVersion(), PolicyVersion: a.GetPolicyVersion(),
		Deadline: humantext.Deadline(exp.UTC(), now.UTC()), OnExpiry: "on expiry " + plan.ExpiryOutcome(wire.OnExpiry(a.GetOnExpiry())),
		Overdue: !now.Before(exp), Quorum: int(max(a.GetQuorum(), 1)), MayDecide: resp.GetMayDecide(), Why: esc(resp.GetWhy()),
		TextAsk: a.GetKind() == tollgatev1.AskKind_ASK_KIND_TEXT, InDoubt: a.GetKind() == tollgatev1.AskKind_ASK_KIND_IN_DOUBT,
		Gate:  a.GetKind() == tollgatev1.AskKind_ASK_KIND_APPROVAL || a.GetKind() == tollgatev1.AskKind_ASK_KIND_GATE,
		Today: now.UTC().Format("2006-01-02")}
	switch a.GetState() {
	case tollgatev1.AskState_ASK_STATE_PENDING, tollgatev1.AskState_ASK_STATE_IN_DOUBT, tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED:
		p.Open = true
	}
	for _, x := range a.GetActions() {
		p.Actions = append(p.Actions, actionView{Step: x.GetStepId(), Server: x.GetServer(), Tool: x.GetTool(), Args: prettyJSON(x.GetArgsJson()), Digest: x.GetPayloadDigest(), Fields: fields(x.GetArgsJson())})
	}
	for _, e := range a.GetEvidence() {
		p.Evidence = append(p.Evidence, artifact(e))
	}
	for _, k := range sortedKeys(a.GetMaterialFields()) {
		p.Facts = append(p.Facts, kv{esc(k), esc(a.GetMaterialFields()[k])})
	}
	for _, c := range a.GetChanges() {
		p.Changes = append(p.Changes, esc(c))
	}
	for _, l := range a.GetLadder() {
		p.Ladder = append(p.Ladder, rungView{Kind: l.GetKind(), At: humantext.Deadline(l.GetAt().AsTime().UTC(), now.UTC()), To: esc(l.GetTo()), Done: l.GetDone()})
	}
	if ar := a.GetAuthorityRequired(); ar != nil {
		p.Authority = authorityView{Description: esc(ar.GetDescription()), PolicyRule: ar.GetPolicyRule(), Roles: ar.GetRoles(), People: ar.GetPrincipals(), Excluded: ar.GetExcluded(), Quorum: ar.GetQuorum()}
	}
	for _, d := range a.GetDecisions() {
		if d.GetKind() == tollgatev1.DecisionKind_DECISION_KIND_APPROVE && d.GetCounts() {
			p.Approvals++
			if d.GetActor() == s.Subject {
				p.Voted = true
			}
		}
		p.Decisions = append(p.Decisions, decisionView{Kind: decisionWord(d.GetKind()), Actor: d.GetActor(), At: d.GetTime().AsTime().UTC().Format("2006-01-02 15:04:05 MST"),
			Reason: esc(cmpOr(d.GetReason(), cmpOr(d.GetEvidenceRequest(), d.GetDelegateTo()))), Option: d.GetOptionId(), Authority: esc(d.GetAuthority()), Via: d.GetVia(), Counts: d.GetCounts()})
	}
	for _, b := range a.GetAmendable() {
		p.Amendable = append(p.Amendable, amendView{Field: b.GetField(), Now: a.GetAmendableValues()[b.GetField()], Min: b.GetMin(), Max: b.GetMax()})
	}
	for _, o := range a.GetOptions() {
		ov := optionView{ID: o.GetId(), Label: esc(o.GetLabel())}
		switch {
		case p.Gate && o.GetProceeds():
			p.Approve = append(p.Approve, ov)
		case !p.Gate:
			p.Choices = append(p.Choices, ov)
		}
	}
	return p
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// prettyJSON is canonical JSON indented for reading (as is, when it is not
// JSON).
func prettyJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return esc(s)
	}
	return esc(b.String())
}

// fields are a JSON object's top-level fields, for the payload's table
// (amount, currency, vendor…): what the approver reads first.
func fields(s string) []kv {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	var out []kv
	for _, k := range slices.Sorted(mapsKeys(m)) {
		v := string(m[k])
		var str string
		if json.Unmarshal(m[k], &str) == nil {
			v = str
		}
		out = append(out, kv{esc(k), esc(v)})
	}
	return out
}

func mapsKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// artifact renders an artifact readably: JSON indented, a diff line by
// line, text as text, anything else as its size and digest.
func artifact(e *tollgatev1.EvidenceArtifact) artifactView {
	v := artifactView{Name: esc(cmpOr(e.GetName(), e.GetRef())), MediaType: e.GetMediaType(), Digest: e.GetDigest(), Note: esc(e.GetNote()), StepID: e.GetStepId(),
		AttachedBy: e.GetAttachedBy(), Size: e.GetSize(), Truncated: e.GetTruncated()}
	c := e.GetContent()
	var str string
	if len(c) > 0 && c[0] == '"' && json.Unmarshal(c, &str) == nil {
		// A step's text output is its canonical JSON, a string: shown as
		// the text it is.
		c = []byte(str)
	}
	switch {
	case !utf8.Valid(c):
		v.Text = fmt.Sprintf("(%d bytes of binary content; digest %s)", e.GetSize(), e.GetDigest())
	case strings.Contains(v.MediaType, "json") || json.Valid(c) && len(c) > 0 && (c[0] == '{' || c[0] == '['):
		v.Text = prettyJSON(string(c))
	case strings.Contains(v.MediaType, "diff") || strings.Contains(v.MediaType, "patch") || bytes.HasPrefix(c, []byte("--- ")) || bytes.HasPrefix(c, []byte("diff ")):
		for _, l := range strings.Split(string(c), "\n") {
			cl := ""
			switch {
			case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
				cl = "file"
			case strings.HasPrefix(l, "+"):
				cl = "add"
			case strings.HasPrefix(l, "-"):
				cl = "del"
			case strings.HasPrefix(l, "@@"):
				cl = "hunk"
			}
			v.Lines = append(v.Lines, diffLine{cl, esc(l)})
		}
	default:
		v.Text = esc(string(c))
	}
	return v
}

// runView is the run page.
type runView struct {
	ID, Name, Requester, State, Reason, Card, Created, Finished, PlanDigest, TraceID string
	// Skill is the saved skill and version it ran; Schedule the schedule
	// and tick that started it ("" when a person or service did).
	Skill, Schedule string
	Steps           []stepView
	Asks            []askRow
	Fans            []fanView
	Blocked         []string
}

type stepView struct {
	ID, Phase, State, Group, Governing, Executor, Started, Took, Error string
	Attempts                                                           int
}

type askRow struct{ ID, Title, State string }

// fanView is one fan's figures, each bar as a share of the largest of
// them (the sum, for a fan of more than one branch).
type fanView struct {
	Group                   string
	Branches                int32
	Wall, Sum, Max          string
	WallPct, SumPct, MaxPct int
	Parallel                string
}

func (h *Handler) runView(r *tollgatev1.Run) runView {
	v := runView{ID: r.GetId(), Name: esc(r.GetSkill()), Requester: r.GetRequester(), State: runStateWord(r.GetState()), Reason: esc(r.GetStateReason()),
		Card: esc(r.GetPlanCard()), Created: r.GetCreatedAt().AsTime().UTC().Format("2006-01-02 15:04:05 MST"), PlanDigest: r.GetPlanDigest(), TraceID: r.GetTraceId()}
	if r.GetFinishedAt() != nil {
		v.Finished = r.GetFinishedAt().AsTime().UTC().Format("2006-01-02 15:04:05 MST")
	}
	if r.GetSkillVersion() > 0 {
		v.Skill = fmt.Sprintf("%s version %d", esc(r.GetSkill()), r.GetSkillVersion())
	}
	if r.GetSchedule() != "" {
		v.Schedule = fmt.Sprintf("%s, for its tick at %s", r.GetSchedule(), r.GetScheduleTick().AsTime().UTC().Format("2006-01-02 15:04:05 MST"))
	}
	steps := slices.Clone(r.GetSteps())
	start := func(s *tollgatev1.StepState) time.Time {
		if n := len(s.GetAttempts()); n > 0 {
			return s.GetAttempts()[0].GetQueuedAt().AsTime()
		}
		return time.Time{}
	}
	slices.SortStableFunc(steps, func(a, b *tollgatev1.StepState) int { return start(a).Compare(start(b)) })
	for _, st := range steps {
		sv := stepView{ID: st.GetStepId(), Phase: st.GetPhase(), State: strings.ToLower(strings.TrimPrefix(st.GetState().String(), "STEP_STATE_")), Group: st.GetParallelGroup(),
			Governing: st.GetGoverningAskId(), Attempts: len(st.GetAttempts())}
		if n := len(st.GetAttempts()); n > 0 {
			last := st.GetAttempts()[n-1]
			sv.Executor = last.GetExecutor()
			if last.GetStartedAt() != nil {
				sv.Started = last.GetStartedAt().AsTime().UTC().Format("15:04:05.000")
				if last.GetFinishedAt() != nil {
					sv.Took = humantext.Span(last.GetFinishedAt().AsTime().Sub(last.GetStartedAt().AsTime()))
				}
			}
			if e := last.GetError(); e != nil {
				sv.Error = esc(e.GetMessage())
			}
		}
		v.Steps = append(v.Steps, sv)
	}
	for _, a := range r.GetAsks() {
		v.Asks = append(v.Asks, askRow{ID: a.GetId(), Title: esc(a.GetTitle()), State: stateWord(a.GetState())})
	}
	for _, f := range r.GetFans() {
		wall, sum, mx := f.GetWall().AsDuration(), f.GetBranchSum().AsDuration(), f.GetBranchMax().AsDuration()
		top := max(wall, sum, mx, time.Microsecond)
		pct := func(d time.Duration) int { return max(1, int(100*d/top)) }
		fv := fanView{Group: f.GetGroup(), Branches: f.GetBranches(), Wall: humantext.Span(wall), Sum: humantext.Span(sum), Max: humantext.Span(mx),
			WallPct: pct(wall), SumPct: pct(sum), MaxPct: pct(mx)}
		if wall > 0 && sum > 0 {
			fv.Parallel = fmt.Sprintf("%.1f× the branches' sum in parallel", float64(sum)/float64(wall))
		}
		v.Fans = append(v.Fans, fv)
	}
	for _, b := range r.GetBlocked() {
		v.Blocked = append(v.Blocked, esc(b.GetStepId()+": "+b.GetReason()))
	}
	return v
}
