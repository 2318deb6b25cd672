package approvectl

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

func newRunsCmd(g *globals) *cobra.Command {
	var states []string
	var requester string
	var limit int32
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Long: `List runs, newest first, with their state and age. Filter with --state
(repeatable: running, parked, blocked, complete, partial, failed, cancelled,
rejected, expired) and --requester.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &tollgatev1.ListRunsRequest{Requester: requester, PageSize: limit}
			for _, s := range states {
				v, ok := tollgatev1.RunState_value["RUN_STATE_"+strings.ToUpper(s)]
				if !ok {
					return usageErr("--state %q: want one of running, parked, blocked, complete, partial, failed, cancelled, rejected, expired", s)
				}
				req.States = append(req.States, tollgatev1.RunState(v))
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			defer c.conn.Close()
			resp, err := c.runs.ListRuns(cmd.Context(), req)
			if err != nil {
				return rpcErr(err)
			}
			if g.json() {
				type row struct {
					RunID     string    `json:"run_id"`
					State     string    `json:"state"`
					Skill     string    `json:"skill,omitempty"`
					Plan      string    `json:"plan"`
					Requester string    `json:"requester"`
					OpenAsks  int32     `json:"open_asks"`
					CreatedAt time.Time `json:"created_at"`
				}
				out := struct {
					Runs []row  `json:"runs"`
					Next string `json:"next_page_token,omitempty"`
				}{Runs: []row{}, Next: resp.GetNextPageToken()}
				for _, r := range resp.GetRuns() {
					out.Runs = append(out.Runs, row{r.GetId(), stateWord(r.GetState()), r.GetSkill(), r.GetPlanName(), r.GetRequester(), r.GetOpenAsks(), r.GetCreatedAt().AsTime()})
				}
				return g.printJSON(out)
			}
			tw := tabwriter.NewWriter(g.cfg.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTATE\tAGE\tPLAN\tREQUESTER\tOPEN ASKS")
			now := time.Now()
			for _, r := range resp.GetRuns() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.GetId(), stateWord(r.GetState()), age(r.GetCreatedAt().AsTime(), now), r.GetPlanName(), r.GetRequester(), r.GetOpenAsks())
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only runs in this state (repeatable)")
	cmd.Flags().StringVar(&requester, "requester", "", "only runs started by this principal")
	cmd.Flags().Int32Var(&limit, "limit", 50, "at most this many runs")
	cmd.AddCommand(newRunsShowCmd(g), newRunsCancelCmd(g))
	return cmd
}

func newRunsShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: its plan card, each step's state, each ask with its decisions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			defer c.conn.Close()
			resp, err := c.runs.GetRun(cmd.Context(), &tollgatev1.GetRunRequest{RunId: args[0]})
			if err != nil {
				return rpcErr(err)
			}
			r := resp.GetRun()
			packets := map[string]*tollgatev1.Ask{}
			for _, a := range r.GetAsks() {
				p, err := c.approvals.GetAsk(cmd.Context(), &tollgatev1.GetAskRequest{AskId: a.GetId()})
				if err == nil {
					packets[a.GetId()] = p.GetAsk()
				}
			}
			if g.json() {
				out := runJSON(r)
				for i, a := range out.Asks {
					if p, ok := packets[a.AskID]; ok {
						out.Asks[i] = askPacketJSON(p)
					}
				}
				return g.printJSON(out)
			}
			w := g.cfg.Stdout
			fmt.Fprintf(w, "run %s  %s  requested by %s  %s\n", r.GetId(), stateWord(r.GetState()), r.GetRequester(), r.GetCreatedAt().AsTime().Format(time.RFC3339))
			if r.GetStateReason() != "" {
				fmt.Fprintf(w, "  %s\n", r.GetStateReason())
			}
			fmt.Fprintln(w)
			fmt.Fprint(w, r.GetPlanCard())
			fmt.Fprintln(w, "\nsteps")
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, s := range r.GetSteps() {
				detail := ""
				if n := len(s.GetAttempts()); n > 0 {
					a := s.GetAttempts()[n-1]
					detail = fmt.Sprintf("attempt %d", a.GetN())
					if a.GetExecutor() != "" {
						detail += " on " + a.GetExecutor()
					}
					if a.GetStartedAt() != nil && a.GetFinishedAt() != nil {
						detail += " · " + a.GetFinishedAt().AsTime().Sub(a.GetStartedAt().AsTime()).Round(time.Millisecond).String()
					}
					if a.GetError() != nil {
						detail += " · " + a.GetError().GetMessage()
					}
				}
				if s.GetGoverningAskId() != "" {
					detail += " · approved by " + s.GetGoverningAskId()
				}
				if s.GetApprovedByStarter() {
					detail += " · approved by starting the run"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.GetStepId(), stepWord(s.GetState()), detail)
			}
			tw.Flush()
			if len(r.GetAsks()) > 0 {
				fmt.Fprintln(w, "\nasks")
			}
			for _, a := range r.GetAsks() {
				fmt.Fprintf(w, "  %s  %s  %q  opened %s, expires %s\n", a.GetId(), askWord(a.GetState()), a.GetTitle(),
					a.GetCreatedAt().AsTime().Format(time.RFC3339), a.GetExpiresAt().AsTime().Format(time.RFC3339))
				if p, ok := packets[a.GetId()]; ok {
					for _, d := range p.GetDecisions() {
						line := fmt.Sprintf("    %s by %s at %s", enumWord(d.GetKind().String(), "DECISION_KIND_"), d.GetActor(), d.GetTime().AsTime().Format(time.RFC3339))
						if d.GetOptionId() != "" {
							line += " · option " + d.GetOptionId()
						}
						if d.GetReason() != "" {
							line += " · " + d.GetReason()
						}
						fmt.Fprintln(w, line)
					}
					if p.GetAnswerCommand() != "" {
						fmt.Fprintf(w, "    answer: %s\n", p.GetAnswerCommand())
					}
				}
			}
			return nil
		},
	}
}

func newRunsCancelCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run; its asks close in the same write",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			defer c.conn.Close()
			resp, err := c.runs.CancelRun(cmd.Context(), &tollgatev1.CancelRunRequest{RunId: args[0], Reason: reason})
			if err != nil {
				return rpcErr(err)
			}
			if g.json() {
				out := runJSON(resp.GetRun())
				return g.printJSON(struct {
					runJSONT
					Report string `json:"report"`
				}{out, resp.GetReport().GetText()})
			}
			fmt.Fprintf(g.cfg.Stdout, "run %s cancelled. %s\n", args[0], resp.GetReport().GetText())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the journal)")
	return cmd
}
