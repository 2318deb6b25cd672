package approvectl

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// auditQuery is one query the audit ran, with its count: the control
// plane's invariant queries (CheckInvariants) and the journal check.
type auditQuery struct {
	Name        string `json:"name"`
	Invariant   string `json:"invariant"` // the design's label: I1, I3, I8
	Rows        uint64 `json:"rows"`      // passing is 0
	Description string `json:"description,omitempty"`
}

// auditViolation is one offending row.
type auditViolation struct {
	Invariant string `json:"invariant"`
	RunID     string `json:"run_id"`
	AskID     string `json:"ask_id,omitempty"`
	StepID    string `json:"step_id,omitempty"`
	Detail    string `json:"detail"`
}

// auditReport is what audit prints, -o json as it is.
type auditReport struct {
	Runs       uint64           `json:"runs_checked"`
	Queries    []auditQuery     `json:"queries"`
	Violations []auditViolation `json:"violations"`
	Broken     []string         `json:"broken_chains"`
}

// chainQuery names the journal check the way the server names its
// queries.
const chainQuery = "journals whose hash chain is broken"

func newAuditCmd(g *globals) *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify the journal's hash chains and run the invariant queries",
		Long: `Verify every run's journal (each record follows the one before; nothing was
altered) and run the audit queries over what was recorded, printing each
query with the rows it found — passing is zero rows:

  questions on finished runs (I3)          asks still pending on a run that ended
  side effects before their approval (I1)  side-effecting steps started before
                                           their approval was consumed
  journals whose hash chain is broken (I8) a record altered, removed or out of order

then every offending row. An auditor or operator audits every run; anyone
else the runs they may see. Exit 1 when anything is found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runID != "" {
				if err := runArg(runID); err != nil {
					return err
				}
			}
			return g.session(cmd, func(ctx context.Context, c *client) error {
				v, err := c.audit.VerifyJournal(ctx, &tollgatev1.VerifyJournalRequest{RunId: runID})
				if err != nil {
					return rpcErr(err)
				}
				inv, err := c.audit.CheckInvariants(ctx, &tollgatev1.CheckInvariantsRequest{RunId: runID})
				if err != nil {
					return rpcErr(err)
				}
				rep := auditOf(v, inv)
				if g.json() {
					if err := g.printJSON(rep); err != nil {
						return err
					}
				} else {
					writeAudit(g.cfg.Stdout, rep, len(v.GetResults()))
				}
				if bad := len(rep.Violations) + len(rep.Broken); bad > 0 {
					return &exitError{code: ExitRefused, err: fmt.Errorf("audit found %d problems", bad), printed: g.json()}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "audit one run")
	return cmd
}

// auditOf gathers the two answers into one report.
func auditOf(v *tollgatev1.VerifyJournalResponse, inv *tollgatev1.CheckInvariantsResponse) auditReport {
	rep := auditReport{Runs: inv.GetRunsChecked(), Queries: []auditQuery{}, Violations: []auditViolation{}, Broken: []string{}}
	for _, q := range inv.GetQueries() {
		rep.Queries = append(rep.Queries, auditQuery{Name: q.GetName(), Invariant: q.GetLabel(), Rows: q.GetRows(), Description: q.GetDescription()})
	}
	for _, x := range inv.GetViolations() {
		rep.Violations = append(rep.Violations, auditViolation{enumWord(x.GetInvariant().String(), "INVARIANT_"), x.GetRunId(), x.GetAskId(), x.GetStepId(), x.GetDetail()})
	}
	for _, r := range v.GetResults() {
		if !r.GetOk() {
			rep.Broken = append(rep.Broken, fmt.Sprintf("%s (record %d: %s)", r.GetRunId(), r.GetFirstBrokenSeq(), r.GetReason()))
		}
	}
	rep.Queries = append(rep.Queries, auditQuery{Name: chainQuery, Invariant: "I8", Rows: uint64(len(rep.Broken)),
		Description: "a record altered, removed or out of order after it was written"})
	return rep
}

// writeAudit prints the report for people: the queries with their rows,
// then each offending row.
func writeAudit(w io.Writer, rep auditReport, journals int) {
	fmt.Fprintf(w, "%d runs checked; %d journals verified\n", rep.Runs, journals)
	width := 0
	for _, q := range rep.Queries {
		width = max(width, len(q.Name)+len(q.Invariant)+3)
	}
	for _, q := range rep.Queries {
		verdict := "ok"
		if q.Rows > 0 {
			verdict = "FOUND"
		}
		fmt.Fprintf(w, "  %-*s %s, %s\n", width, q.Name+" ("+q.Invariant+")", verdict, plural(int(q.Rows), "row"))
	}
	for _, r := range rep.Violations {
		fmt.Fprintf(w, "VIOLATION %s run %s %s%s: %s\n", r.Invariant, r.RunID, r.AskID, r.StepID, r.Detail)
	}
	for _, b := range rep.Broken {
		fmt.Fprintf(w, "BROKEN CHAIN %s\n", b)
	}
}
