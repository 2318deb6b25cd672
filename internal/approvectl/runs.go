package approvectl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

func newRunsCmd(g *globals) *cobra.Command {
	var states []string
	var requester, schedule string
	var limit int32
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Long: `List runs, newest first, each with its state, its age (how long ago it
started: 45s, 12m, 3h, 2d), its plan (SKILL@V for a run of version V of a
saved skill) and the schedule that started it ("-" when a person did).
Filter with --state (repeatable: running, parked, blocked, complete,
partial, failed, cancelled, rejected, expired), --requester and --schedule.
-o json prints each run's created_at instead of an age, and its skill,
skill_version and schedule. approvectl runs show RUN prints one run's
timeline.`,
		Example: `  approvectl --as alice runs
  approvectl --as alice runs --state parked --state blocked
  approvectl --as alice runs --schedule nightly
  approvectl --as alice runs -o json | jq -r '.runs[] | select(.state == "parked") | .run_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if schedule != "" {
				if err := scheduleName(schedule); err != nil {
					return err
				}
			}
			req := &tollgatev1.ListRunsRequest{Requester: requester, PageSize: limit, Schedule: schedule}
			for _, s := range states {
				v, ok := tollgatev1.RunState_value["RUN_STATE_"+strings.ToUpper(s)]
				if !ok {
					return usageErr("--state %q: want one of running, parked, blocked, complete, partial, failed, cancelled, rejected, expired", s)
				}
				req.States = append(req.States, tollgatev1.RunState(v))
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.ListRunsResponse, error) {
				return c.runs.ListRuns(ctx, req)
			}, func(resp *tollgatev1.ListRunsResponse) any {
				type row struct {
					RunID        string    `json:"run_id"`
					State        string    `json:"state"`
					Skill        string    `json:"skill,omitempty"`
					SkillVersion int64     `json:"skill_version,omitempty"`
					Schedule     string    `json:"schedule,omitempty"`
					Plan         string    `json:"plan"`
					Requester    string    `json:"requester"`
					OpenAsks     int32     `json:"open_asks"`
					CreatedAt    time.Time `json:"created_at"`
				}
				out := struct {
					Runs []row  `json:"runs"`
					Next string `json:"next_page_token,omitempty"`
				}{Runs: []row{}, Next: resp.GetNextPageToken()}
				for _, r := range resp.GetRuns() {
					out.Runs = append(out.Runs, row{r.GetId(), stateWord(r.GetState()), r.GetSkill(), r.GetSkillVersion(), r.GetSchedule(), r.GetPlanName(),
						r.GetRequester(), r.GetOpenAsks(), r.GetCreatedAt().AsTime()})
				}
				return out
			}, func(w io.Writer, resp *tollgatev1.ListRunsResponse) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tSTATE\tAGE\tPLAN\tSCHEDULE\tREQUESTER\tOPEN ASKS")
				now := g.cfg.Now()
				for _, r := range resp.GetRuns() {
					plan, sched := r.GetPlanName(), r.GetSchedule()
					if r.GetSkill() != "" && r.GetSkillVersion() != 0 {
						plan = fmt.Sprintf("%s@%d", r.GetSkill(), r.GetSkillVersion())
					}
					if sched == "" {
						sched = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.GetId(), stateWord(r.GetState()), age(r.GetCreatedAt().AsTime(), now), cell(plan), cell(sched),
						r.GetRequester(), r.GetOpenAsks())
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only runs in this state (repeatable)")
	cmd.Flags().StringVar(&requester, "requester", "", "only runs started by this principal")
	cmd.Flags().StringVar(&schedule, "schedule", "", "only runs this schedule started")
	cmd.Flags().Int32Var(&limit, "limit", 50, "at most this many runs")
	cmd.AddCommand(newRunsShowCmd(g), newRunsCancelCmd(g))
	return cmd
}

func newRunsShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: its plan card and a timeline of its steps, fans and asks",
		Long: `Show a run: who started it and its state, the plan card it runs, then a
timeline of what it did, in order, each line with its time from the start:

  - each step with its state, the executor of its latest attempt, how many
    attempts it took, the time executors spent on it (each attempt's lease
    to its finish, summed), and how long it waited for an executor (queued);
  - each fan (a 'together' group) as one line with its branches under it:
    "fan probes  3 branches  wall 412ms · sum 763ms · max 412ms" — wall from
    the first branch queued to the last finished, sum and max of the branch
    times. Wall near max: the branches ran at once; near sum: one at a time.
    These are the figures the run's trace records;
  - each ask with how long it waited for a person (opened → decided, or
    "waiting 3h12m" while open), every decision (what, who, when) and, while
    it waits, the command that answers it.

-o json carries the same in structured form: steps (with phase,
parallel_group, branch_ms, queue_wait_ms and attempt_log), fans (wall_ms,
branch_sum_ms, branch_max_ms) and asks (opened_at, closed_at, wait_ms,
decisions).`,
		Example: `  approvectl --as alice runs show r_538qtqz0wpmp
  approvectl --as alice runs show r_538qtqz0wpmp -o json | jq '.fans[] | {group, wall_ms, branch_max_ms}'`,
		Args: runArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (runPackets, error) {
				return getRunPackets(ctx, c, args[0])
			}, func(rp runPackets) any {
				now := g.cfg.Now()
				out := runJSON(rp.run, now)
				for i, a := range out.Asks {
					if p, ok := rp.packets[a.AskID]; ok {
						out.Asks[i] = askPacketJSON(p, now)
					}
				}
				return out
			}, func(w io.Writer, rp runPackets) error {
				writeRun(w, rp.run, rp.packets, g.cfg.Now())
				return nil
			})
		},
	}
}

// runPackets is a run with the decision packet of each of its asks that
// the caller may read.
type runPackets struct {
	run     *tollgatev1.Run
	packets map[string]*tollgatev1.Ask
}

// getRunPackets reads a run and its asks' packets; an ask the caller may
// not read is left out, the run is still shown.
func getRunPackets(ctx context.Context, c *client, id string) (runPackets, error) {
	resp, err := c.runs.GetRun(ctx, &tollgatev1.GetRunRequest{RunId: id})
	if err != nil {
		return runPackets{}, err
	}
	rp := runPackets{run: resp.GetRun(), packets: map[string]*tollgatev1.Ask{}}
	for _, a := range rp.run.GetAsks() {
		p, err := c.approvals.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: a.GetId()})
		if err == nil {
			rp.packets[a.GetId()] = p.GetAsk()
		}
	}
	return rp, nil
}

// writeRun prints a run for people: its header, its plan card and its
// timeline.
func writeRun(w io.Writer, r *tollgatev1.Run, packets map[string]*tollgatev1.Ask, now time.Time) {
	w = escaped{w} // a run's record quotes others' words: titles, reasons, outputs
	created := r.GetCreatedAt().AsTime()
	fmt.Fprintf(w, "run %s  %s  requested by %s  %s\n", r.GetId(), stateWord(r.GetState()), r.GetRequester(), created.Format(time.RFC3339))
	if r.GetStateReason() != "" {
		fmt.Fprintf(w, "  %s\n", r.GetStateReason())
	}
	if sk := r.GetSkill(); sk != "" && r.GetSkillVersion() != 0 {
		fmt.Fprintf(w, "  skill: %s v%d\n", sk, r.GetSkillVersion())
	} else if sk != "" {
		fmt.Fprintf(w, "  skill: %s\n", sk)
	}
	if sc := r.GetSchedule(); sc != "" {
		fmt.Fprintf(w, "  started by schedule %s for the tick %s\n", sc, tsTime(r.GetScheduleTick()).Format(time.RFC3339))
	}
	if f := r.GetFinishedAt(); f != nil {
		fmt.Fprintf(w, "  ended %s, %s after it started\n", f.AsTime().Format(time.RFC3339), span(f.AsTime().Sub(created)))
	} else {
		fmt.Fprintf(w, "  live for %s\n", span(now.Sub(created)))
	}
	writeBlocked(w, r)
	fmt.Fprintln(w)
	if r.GetExternal() {
		writePendingGates(w, r, packets, now)
	} else {
		fmt.Fprint(w, r.GetPlanCard())
	}
	fmt.Fprintln(w, "\ntimeline (time from the start of the run)")
	writeTimeline(w, r, packets, now)
}

func newRunsCancelCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run; its asks close in the same write",
		Args:  runArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.CancelRunResponse, error) {
				return c.runs.CancelRun(ctx, &tollgatev1.CancelRunRequest{RunId: args[0], Reason: reason})
			}, func(resp *tollgatev1.CancelRunResponse) any {
				return struct {
					runJSONT
					Report string `json:"report"`
				}{runJSON(resp.GetRun(), g.cfg.Now()), resp.GetReport().GetText()}
			}, func(w io.Writer, resp *tollgatev1.CancelRunResponse) error {
				fmt.Fprintf(w, "run %s cancelled. %s\n", args[0], resp.GetReport().GetText())
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the journal)")
	return cmd
}

// writePendingGates says, for an external run, what its waiting gate
// needs: what to read (with digests), who may decide, by when, and the
// exact commands that decide it and resume the script.
func writePendingGates(w io.Writer, r *tollgatev1.Run, packets map[string]*tollgatev1.Ask, now time.Time) {
	fmt.Fprintln(w, "external run: a script does its steps and opens its gates (approvectl gate)")
	for _, a := range r.GetAsks() {
		p := packets[a.GetId()]
		if p == nil || p.GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
			continue
		}
		gate := p.GetStoppingPointId()
		fmt.Fprintf(w, "\nwaiting at gate %s: %s\n", gate, p.GetTitle())
		for _, e := range p.GetEvidence() {
			fmt.Fprintf(w, "  read   %s (%s, %d bytes) %s\n", e.GetName(), e.GetMediaType(), len(e.GetContent()), e.GetDigest())
		}
		for _, act := range p.GetActions() {
			fmt.Fprintf(w, "  grants %s.%s %s (payload %s)\n", act.GetServer(), act.GetTool(), act.GetArgsJson(), act.GetPayloadDigest())
		}
		who := "a person the policy allows"
		if d := p.GetAuthorityRequired().GetDescription(); d != "" {
			who = d
		}
		fmt.Fprintf(w, "  who    %s\n", who)
		exp := p.GetExpiresAt().AsTime()
		fmt.Fprintf(w, "  until  %s\n", deadlineText(exp, now))
		fmt.Fprintf(w, "  approve: approvectl approve %s\n", a.GetId())
		fmt.Fprintf(w, "  reject:  approvectl reject %s --reason TEXT\n", a.GetId())
		fmt.Fprintf(w, "  resume:  the waiting script goes on by itself once it is approved; if it is not running, re-run it\n")
		fmt.Fprintf(w, "           with TOLLGATE_RUN=%s (completed steps are skipped), or read the decision with\n", r.GetId())
		fmt.Fprintf(w, "           approvectl gate %s --run %s --summary %q\n", gate, r.GetId(), p.GetTitle())
	}
}

// writeBlocked says, for a blocked run, which steps wait for an executor,
// what each needs and why none takes it, and what the executors
// connected to the control plane offer. It prints nothing for a run with
// no blocked step.
func writeBlocked(w io.Writer, r *tollgatev1.Run) {
	if len(r.GetBlocked()) == 0 {
		return
	}
	fmt.Fprintln(w, "  blocked: waiting for an executor (the run resumes by itself when one that offers it connects)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, b := range r.GetBlocked() {
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", blockedName(b), blockedNeed(b), b.GetReason())
	}
	_ = tw.Flush()
	execs := r.GetExecutors()
	if len(execs) == 0 {
		fmt.Fprintln(w, "  connected executors: none; start one whose mcp_servers offer the tools above (executor --config FILE)")
		return
	}
	fmt.Fprintln(w, "  connected executors:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range execs {
		fmt.Fprintf(tw, "    %s\t%s\n", e.GetId(), executorOffers(e))
	}
	_ = tw.Flush()
}

// blockedName is how a blocked step is named: its id, or for an ask's
// freshness check, the ask (the check's step id is internal).
func blockedName(b *tollgatev1.BlockedStep) string {
	if a := b.GetCheckOfAskId(); a != "" {
		return "check of " + a
	}
	return b.GetStepId()
}

// blockedNeed is what a blocked step needs: server·tool or prose, and
// its placement label.
func blockedNeed(b *tollgatev1.BlockedStep) string {
	n := b.GetServer() + "·" + b.GetTool() // as the plan card writes it
	if b.GetProse() {
		n = "prose (a model)"
	}
	if l := b.GetLabel(); l != "" {
		n += " on " + l
	}
	return n
}

// executorOffers is what a connected executor offers, in one line.
func executorOffers(e *tollgatev1.ConnectedExecutor) string {
	var parts []string
	if ls := e.GetLabels(); len(ls) > 0 {
		parts = append(parts, "labels "+strings.Join(ls, ", "))
	}
	if e.GetProse() {
		parts = append(parts, "prose")
	}
	tools := "no tools"
	if ts := e.GetTools(); len(ts) > 0 {
		shown := make([]string, len(ts))
		for i, st := range ts {
			shown[i] = strings.Replace(st, ".", "·", 1) // server.tool, as the plan card writes it
		}
		tools = "tools " + strings.Join(shown, ", ")
	}
	return strings.Join(append(parts, tools), "  ")
}

// blockedJSON and executorJSON are a blocked run's steps and connected
// executors for scripts (runJSON).
type blockedJSON struct {
	StepID     string `json:"step_id"`
	Server     string `json:"server,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Label      string `json:"label,omitempty"`
	Prose      bool   `json:"prose,omitempty"`
	CheckOfAsk string `json:"check_of_ask_id,omitempty"`
	Reason     string `json:"reason"`
}

type executorJSON struct {
	ID     string   `json:"id"`
	Labels []string `json:"labels"`
	Tools  []string `json:"tools"`
	Prose  bool     `json:"prose"`
}

// blockedOf is r's blocked steps and connected executors for runJSON; nil
// slices (left out) when no step is blocked.
func blockedOf(r *tollgatev1.Run) ([]blockedJSON, []executorJSON) {
	if len(r.GetBlocked()) == 0 {
		return nil, nil
	}
	bs := make([]blockedJSON, 0, len(r.GetBlocked()))
	for _, b := range r.GetBlocked() {
		bs = append(bs, blockedJSON{StepID: b.GetStepId(), Server: b.GetServer(), Tool: b.GetTool(), Label: b.GetLabel(), Prose: b.GetProse(),
			CheckOfAsk: b.GetCheckOfAskId(), Reason: b.GetReason()})
	}
	es := make([]executorJSON, 0, len(r.GetExecutors()))
	for _, e := range r.GetExecutors() {
		es = append(es, executorJSON{ID: e.GetId(), Labels: append([]string{}, e.GetLabels()...), Tools: append([]string{}, e.GetTools()...), Prose: e.GetProse()})
	}
	return bs, es
}
