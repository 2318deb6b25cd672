package approvectl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

func newAsksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "asks",
		Short: "Your inbox: the pending asks you may decide",
		Long: `Your inbox: the pending asks you may decide, oldest first as the server
orders them, each with how long it has been open (45m, 3h, 2d), its
deadline (in your local time, and relative: "in 5h", or "overdue 10m" for
one whose deadline passed and that no reader has expired yet) and why it
is yours to decide. -o json prints opened_at, expires_at and wait_ms (open
for, in milliseconds) for each.`,
		Example: `  approvectl --as dave asks
  approvectl --as dave asks -o json | jq -r '.asks[] | select(.wait_ms > 3600000) | .ask_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.ListAsksResponse, error) {
				return c.approvals.ListAsks(ctx, &tollgatev1.ListAsksRequest{})
			}, func(resp *tollgatev1.ListAsksResponse) any {
				out := struct {
					Asks []askJSON `json:"asks"`
				}{Asks: []askJSON{}}
				now := g.cfg.Now()
				for _, it := range resp.GetItems() {
					out.Asks = append(out.Asks, askSummaryJSON(it.GetAsk(), now))
				}
				return out
			}, func(w io.Writer, resp *tollgatev1.ListAsksResponse) error {
				return writeInbox(w, resp.GetItems(), g.cfg.Now(), time.Local)
			})
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "show ASK",
		Short: "Show an ask's decision packet: what exactly you would approve",
		Args:  askArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.GetAskResponse, error) {
				return c.approvals.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: args[0]})
			}, func(resp *tollgatev1.GetAskResponse) any {
				return struct {
					askJSON
					MayDecide bool   `json:"may_decide"`
					Why       string `json:"why"`
				}{askPacketJSON(resp.GetAsk(), g.cfg.Now()), resp.GetMayDecide(), resp.GetWhy()}
			}, func(w io.Writer, resp *tollgatev1.GetAskResponse) error {
				writePacket(w, resp, g.cfg.Now())
				return nil
			})
		},
	})
	return cmd
}

// writePacket prints an ask's decision packet for the person who may
// decide it; now is the clock its next rung is read against.
func writePacket(w io.Writer, resp *tollgatev1.GetAskResponse, now time.Time) {
	a := resp.GetAsk()
	fmt.Fprintf(w, "%s  %s\n  %s\n", a.GetId(), askWord(a.GetState()), a.GetTitle())
	fmt.Fprintf(w, "  requested by %s · opened %s · expires %s\n", a.GetRequester(), a.GetCreatedAt().AsTime().Format(time.RFC3339), deadlineText(a.GetExpiresAt().AsTime(), now))
	fmt.Fprintf(w, "  %s\n", a.GetConsequence())
	for _, act := range a.GetActions() {
		fmt.Fprintf(w, "  action %s: %s·%s %s\n    payload %s\n", act.GetStepId(), act.GetServer(), act.GetTool(), act.GetArgsJson(), act.GetPayloadDigest())
	}
	if r := a.GetStateReason(); r != "" {
		fmt.Fprintf(w, "  %s\n", r)
	}
	if len(a.GetMaterialFields()) > 0 {
		fmt.Fprintf(w, "  facts checked before it is used (%s):\n", a.GetResourceVersion())
		for _, f := range slices.Sorted(maps.Keys(a.GetMaterialFields())) {
			fmt.Fprintf(w, "    %s = %s\n", f, a.GetMaterialFields()[f])
		}
	}
	for _, b := range a.GetAmendable() {
		fmt.Fprintf(w, "  amendable: %s between %d and %d (approvectl amend %s %s N)\n", b.GetField(), b.GetMin(), b.GetMax(), a.GetId(), b.GetField())
	}
	if req := a.GetAuthorityRequired(); req != nil {
		fmt.Fprintf(w, "  decided by %s; %d approval(s) needed", req.GetDescription(), req.GetQuorum())
		if len(req.GetPrincipals()) > 0 {
			fmt.Fprintf(w, "; who may: %s", strings.Join(req.GetPrincipals(), ", "))
		}
		if len(req.GetExcluded()) > 0 {
			fmt.Fprintf(w, "; never: %s (separation of duties)", strings.Join(req.GetExcluded(), ", "))
		}
		fmt.Fprintln(w)
	}
	if to := a.GetEscalatedTo(); to != "" {
		fmt.Fprintf(w, "  escalated to %s\n", to)
	}
	switch {
	case a.GetRemindAt() != nil && a.GetRemindAt().AsTime().After(now):
		fmt.Fprintf(w, "  next: a reminder at %s\n", a.GetRemindAt().AsTime().Format(time.RFC3339))
	case a.GetEscalateAt() != nil:
		fmt.Fprintf(w, "  next: escalates at %s\n", a.GetEscalateAt().AsTime().Format(time.RFC3339))
	case a.GetState() == tollgatev1.AskState_ASK_STATE_PENDING:
		fmt.Fprintf(w, "  next: the deadline, %s; %s\n", deadlineText(a.GetExpiresAt().AsTime(), now), expiryText(a.GetOnExpiry()))
	}
	for _, o := range a.GetOptions() {
		fmt.Fprintf(w, "  %s) %s\n", o.GetId(), o.GetLabel())
	}
	for _, d := range a.GetDecisions() {
		fmt.Fprintf(w, "  %s by %s at %s %s\n", enumWord(d.GetKind().String(), "DECISION_KIND_"), d.GetActor(), d.GetTime().AsTime().Format(time.RFC3339), d.GetReason())
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

// writeInbox prints the inbox as a table: how long each ask has been open
// and its deadline, absolute in loc and relative to now.
func writeInbox(w io.Writer, items []*tollgatev1.InboxItem, now time.Time, loc *time.Location) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ASK\tTITLE\tOPEN\tDEADLINE\tWHY YOU")
	for _, it := range items {
		a := it.GetAsk()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.GetId(), a.GetTitle(), age(a.GetCreatedAt().AsTime(), now),
			deadlineText(a.GetExpiresAt().AsTime().In(loc), now), it.GetWhy())
	}
	return tw.Flush()
}
