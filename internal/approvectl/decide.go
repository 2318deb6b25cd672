package approvectl

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

func (g *globals) decide(cmd *cobra.Command, req *tollgatev1.DecideRequest) error {
	c, err := g.dial()
	if err != nil {
		return err
	}
	defer c.conn.Close()
	resp, err := c.approvals.Decide(cmd.Context(), req)
	if err != nil {
		return rpcErr(err)
	}
	if g.json() {
		return g.printJSON(struct {
			askJSON
			RunState string `json:"run_state"`
		}{askPacketJSON(resp.GetAsk()), stateWord(resp.GetRunState())})
	}
	d := resp.GetDecision()
	fmt.Fprintf(g.cfg.Stdout, "%s: %s by %s; the run is %s\n", req.GetAskId(), enumWord(d.GetKind().String(), "DECISION_KIND_"), d.GetActor(), stateWord(resp.GetRunState()))
	return nil
}

func newApproveCmd(g *globals) *cobra.Command {
	var option, reason, digest string
	cmd := &cobra.Command{
		Use:   "approve ASK",
		Short: "Approve an ask (its first option, or --option N)",
		Long: `Approve an ask as yourself. For a question, --option picks the answer by number.
--payload binds the approval to the exact payload digest you reviewed
(approvectl asks show): if the ask now binds anything else, it is refused.
A refusal exits 1 and says why: already decided, expired, permission denied.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.decide(cmd, &tollgatev1.DecideRequest{AskId: args[0], ExpectedPayloadDigest: digest,
				Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: option, Reason: reason}}})
		},
	}
	cmd.Flags().StringVar(&option, "option", "", "option number (default 1: Yes)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	cmd.Flags().StringVar(&digest, "payload", "", "the payload digest you reviewed")
	return cmd
}

func newRejectCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "reject ASK --reason TEXT",
		Short: "Reject an ask, with a reason (the run ends rejected unless No has steps)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErr("reject needs --reason: say why, it is recorded")
			}
			return g.decide(cmd, &tollgatev1.DecideRequest{AskId: args[0],
				Decision: &tollgatev1.DecideRequest_Reject{Reject: &tollgatev1.Reject{Reason: reason}}})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required, recorded)")
	return cmd
}

func newAmendCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "amend ASK FIELD VALUE",
		Short: "Change an amendable field of an ask's payload within its bounds",
		Long: `Change a field the recipe declared amendable (amend: FIELD between MIN and MAX),
e.g. "approvectl amend RUN/ask_1 amount 400000". VALUE is an integer in minor
units; outside the bounds it is refused. The payload digest changes, so
approvals given before no longer count: approve again after amending.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			defer c.conn.Close()
			resp, err := c.approvals.Decide(cmd.Context(), &tollgatev1.DecideRequest{AskId: args[0],
				Decision: &tollgatev1.DecideRequest_Amend{Amend: &tollgatev1.Amend{Field: args[1], NewValueJson: args[2], Reason: reason}}})
			if err != nil {
				return rpcErr(err)
			}
			if g.json() {
				return g.printJSON(askPacketJSON(resp.GetAsk()))
			}
			fmt.Fprintf(g.cfg.Stdout, "%s: %s is now %s; the payload digest is %s (approve again)\n", args[0], args[1], args[2], resp.GetAsk().GetPayloadDigest())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

func newRevokeCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke ASK --reason TEXT",
		Short: "Withdraw your approval of an ask that still waits for its quorum",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErr("revoke needs --reason: say why, it is recorded")
			}
			return g.decide(cmd, &tollgatev1.DecideRequest{AskId: args[0],
				Decision: &tollgatev1.DecideRequest_Revoke{Revoke: &tollgatev1.Revoke{Reason: reason}}})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required, recorded)")
	return cmd
}

func newAnswerCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "answer ASK [TEXT]",
		Short: "Reply to an ask in words: an option number or label, menu, or cancel",
		Long: `Reply to an ask the way a chat surface would. A number or an option's label
selects it; "menu" shows the options again; "cancel" (or exit, quit, stop,
nevermind) drops the run and says what ran. In a free-text question, your
words are the answer and only /menu and /cancel are commands.

Without TEXT, prompt for replies until one selects or drops.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			defer c.conn.Close()
			send := func(text string) (*tollgatev1.AnswerResponse, error) {
				resp, err := c.approvals.Answer(cmd.Context(), &tollgatev1.AnswerRequest{AskId: args[0], Text: text})
				if err != nil {
					return nil, rpcErr(err)
				}
				if g.json() {
					return resp, g.printJSON(struct {
						Kind     string `json:"kind"`
						Message  string `json:"message"`
						Option   string `json:"option_id,omitempty"`
						Misses   int32  `json:"misses"`
						RunState string `json:"run_state"`
					}{enumWord(resp.GetKind().String(), "ANSWER_KIND_"), resp.GetResponseText(), resp.GetSelectedOptionId(), resp.GetMissCount(), stateWord(resp.GetRunState())})
				}
				fmt.Fprintln(g.cfg.Stdout, resp.GetResponseText())
				return resp, nil
			}
			if len(args) == 2 {
				_, err := send(args[1])
				return err
			}
			if g.cfg.Stdin == nil {
				return usageErr("give the reply as TEXT (no terminal to prompt on)")
			}
			sc := bufio.NewScanner(g.cfg.Stdin)
			for {
				fmt.Fprint(g.cfg.Stderr, "> ")
				if !sc.Scan() {
					return nil
				}
				resp, err := send(sc.Text())
				if err != nil {
					return err
				}
				switch resp.GetKind() {
				case tollgatev1.AnswerKind_ANSWER_KIND_SELECTED, tollgatev1.AnswerKind_ANSWER_KIND_DROPPED:
					return nil
				}
			}
		},
	}
}

func newAuditCmd(g *globals) *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify the journal's hash chains and run the invariant queries",
		Long: `Verify every run's journal (each record follows the one before; nothing was
altered) and run the audit queries: asks still pending on finished runs, and
side-effecting steps started before their approval was consumed. Exit 1 when
anything is found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			defer c.conn.Close()
			v, err := c.audit.VerifyJournal(cmd.Context(), &tollgatev1.VerifyJournalRequest{RunId: runID})
			if err != nil {
				return rpcErr(err)
			}
			inv, err := c.audit.CheckInvariants(cmd.Context(), &tollgatev1.CheckInvariantsRequest{RunId: runID})
			if err != nil {
				return rpcErr(err)
			}
			bad := 0
			type violation struct {
				Invariant string `json:"invariant"`
				RunID     string `json:"run_id"`
				AskID     string `json:"ask_id,omitempty"`
				StepID    string `json:"step_id,omitempty"`
				Detail    string `json:"detail"`
			}
			var rows []violation
			for _, x := range inv.GetViolations() {
				rows = append(rows, violation{enumWord(x.GetInvariant().String(), "INVARIANT_"), x.GetRunId(), x.GetAskId(), x.GetStepId(), x.GetDetail()})
			}
			var broken []string
			for _, r := range v.GetResults() {
				if !r.GetOk() {
					broken = append(broken, fmt.Sprintf("%s (record %d: %s)", r.GetRunId(), r.GetFirstBrokenSeq(), r.GetReason()))
				}
			}
			bad = len(rows) + len(broken)
			if g.json() {
				if err := g.printJSON(struct {
					Runs       uint64      `json:"runs_checked"`
					Violations []violation `json:"violations"`
					Broken     []string    `json:"broken_chains"`
				}{inv.GetRunsChecked(), append([]violation{}, rows...), append([]string{}, broken...)}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(g.cfg.Stdout, "%d runs checked; %d journals verified\n", inv.GetRunsChecked(), len(v.GetResults()))
				for _, r := range rows {
					fmt.Fprintf(g.cfg.Stdout, "VIOLATION %s run %s %s%s: %s\n", r.Invariant, r.RunID, r.AskID, r.StepID, r.Detail)
				}
				for _, b := range broken {
					fmt.Fprintf(g.cfg.Stdout, "BROKEN CHAIN %s\n", b)
				}
			}
			if bad > 0 {
				return &exitError{code: ExitRefused, err: fmt.Errorf("audit found %d problems", bad), printed: g.json()}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "audit one run")
	return cmd
}
