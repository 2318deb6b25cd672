package approvectl

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

func newWatchCmd(g *globals) *cobra.Command {
	var runID string
	return &cobra.Command{
		Use:   "watch",
		Short: "Show your inbox live: asks as they arrive, change and leave",
		Long: `Stream your inbox: first every ask you may decide now, then one line per
change — an ask added (it opened, escalated to you, was delegated to you),
updated (a vote, a reminder) or removed (decided, expired, no longer yours).
-o json prints one JSON object per line. It runs until interrupted (exit 0)
or the server goes away (exit 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.session(cmd, func(ctx context.Context, c *client) error {
				stream, err := c.approvals.WatchAsks(ctx, &tollgatev1.WatchAsksRequest{RunId: runID})
				if err != nil {
					return rpcErr(err)
				}
				for {
					m, err := stream.Recv()
					if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || ctx.Err() != nil {
						return nil
					}
					if err != nil {
						return rpcErr(err)
					}
					kind := enumWord(m.GetKind().String(), "INBOX_CHANGE_KIND_")
					a := m.GetItem().GetAsk()
					if g.json() {
						out := map[string]any{"change": kind}
						if a != nil {
							out["ask"] = askSummaryJSON(a, g.cfg.Now())
							out["why"] = m.GetItem().GetWhy()
						}
						if err := g.printJSONLine(out); err != nil {
							return err
						}
						continue
					}
					switch m.GetKind() {
					case tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_SYNCED:
						fmt.Fprintln(g.cfg.Stdout, "— watching; new asks appear below —")
					case tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_REMOVED:
						fmt.Fprintf(g.cfg.Stdout, "%s  removed  %s\n", g.cfg.Now().Format("15:04:05"), a.GetId())
					default:
						fmt.Fprintf(g.cfg.Stdout, "%s  %-7s  %s  %q  expires %s  (%s)\n", g.cfg.Now().Format("15:04:05"), kind, a.GetId(), a.GetTitle(),
							deadlineText(a.GetExpiresAt().AsTime().Local(), g.cfg.Now()), m.GetItem().GetWhy())
					}
				}
			})
		},
	}
}
