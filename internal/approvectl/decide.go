package approvectl

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

func (g *globals) decide(cmd *cobra.Command, req *tollgatev1.DecideRequest) error {
	return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.DecideResponse, error) {
		return c.approvals.Decide(ctx, req)
	}, func(resp *tollgatev1.DecideResponse) any {
		return struct {
			askJSON
			RunState string `json:"run_state"`
		}{askPacketJSON(resp.GetAsk(), g.cfg.Now()), stateWord(resp.GetRunState())}
	}, func(w io.Writer, resp *tollgatev1.DecideResponse) error {
		d := resp.GetDecision()
		fmt.Fprintf(w, "%s: %s by %s; the run is %s\n", req.GetAskId(), enumWord(d.GetKind().String(), "DECISION_KIND_"), d.GetActor(), stateWord(resp.GetRunState()))
		return nil
	})
}

// shown is the payload and evidence digests an approval binds: the ones
// the caller reviewed (--payload, --evidence, as 'asks show' prints them),
// or else the ask's as approvectl reads it now — never none, so the
// control plane refuses the approval if the ask changes in between (I6).
func (g *globals) shown(cmd *cobra.Command, askID, payload, evidence string) (string, string, error) {
	if payload != "" && evidence != "" {
		return payload, evidence, nil
	}
	resp, err := fetch(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.GetAskResponse, error) {
		return c.approvals.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: askID})
	})
	if err != nil {
		return "", "", err
	}
	return cmp.Or(payload, resp.GetAsk().GetPayloadDigest()), cmp.Or(evidence, resp.GetAsk().GetEvidenceDigest()), nil
}

func newApproveCmd(g *globals) *cobra.Command {
	var option, reason, digest, evidence, until, scope string
	cmd := &cobra.Command{
		Use:   "approve ASK",
		Short: "Approve an ask (its first option, or --option N)",
		Long: `Approve an ask as yourself. For a question, --option picks the answer by number.
--payload binds the approval to the exact payload digest you reviewed
(approvectl asks show): if the ask now binds anything else, it is refused.
--evidence does the same for the evidence digest. Without them, approvectl
binds the digests of the ask as it reads it just before approving.
A refusal exits 1 and says why: already decided, expired, permission denied.`,
		Args: askArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			digest, ev, err := g.shown(cmd, args[0], digest, evidence)
			if err != nil {
				return err
			}
			if until != "" || scope != "" {
				if until == "" || scope == "" || strings.TrimSpace(reason) == "" {
					return usageErr("a standing approval needs --until, --scope and --reason")
				}
				t, err := parseUntil(until, g.cfg.Now())
				if err != nil {
					return usageErr("%s", err)
				}
				return g.decide(cmd, &tollgatev1.DecideRequest{AskId: args[0], ExpectedPayloadDigest: digest, ExpectedEvidenceDigest: ev,
					Decision: &tollgatev1.DecideRequest_ApproveException{ApproveException: &tollgatev1.ApproveException{
						OptionId: option, Until: timestamppb.New(t), Scope: scope, Reason: reason}}})
			}
			return g.decide(cmd, &tollgatev1.DecideRequest{AskId: args[0], ExpectedPayloadDigest: digest, ExpectedEvidenceDigest: ev,
				Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: option, Reason: reason}}})
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "also grant a standing approval until DATE (2026-12-31, RFC 3339, or a duration such as 720h)")
	cmd.Flags().StringVar(&scope, "scope", "", `the standing approval's scope, e.g. "payments.pay vendor=V-1187 amount<=500000"`)
	cmd.Flags().StringVar(&option, "option", "", "option number (default 1: Yes)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	cmd.Flags().StringVar(&digest, "payload", "", "the payload digest you reviewed (default: the ask's as read now)")
	cmd.Flags().StringVar(&evidence, "evidence", "", "the evidence digest you reviewed (default: the ask's as read now)")
	return cmd
}

// textVerb is a decision verb whose one required flag is words recorded
// with it (a reason, what evidence is needed).
func textVerb(g *globals, use, short, long, flag, help string, decision func(text string) *tollgatev1.DecideRequest) *cobra.Command {
	var text string
	verb, _, _ := strings.Cut(use, " ")
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  askArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(text) == "" {
				return usageErr("%s needs --%s: %s", verb, flag, help)
			}
			req := decision(text)
			req.AskId = args[0]
			return g.decide(cmd, req)
		},
	}
	cmd.Flags().StringVar(&text, flag, "", help+" (required, recorded)")
	return cmd
}

func newRejectCmd(g *globals) *cobra.Command {
	return textVerb(g, "reject ASK --reason TEXT", "Reject an ask, with a reason (the run ends rejected unless No has steps)", "",
		"reason", "say why", func(r string) *tollgatev1.DecideRequest {
			return &tollgatev1.DecideRequest{Decision: &tollgatev1.DecideRequest_Reject{Reject: &tollgatev1.Reject{Reason: r}}}
		})
}

func newRevokeCmd(g *globals) *cobra.Command {
	return textVerb(g, "revoke ASK --reason TEXT", "Withdraw your approval of an ask that still waits for its quorum", "",
		"reason", "say why", func(r string) *tollgatev1.DecideRequest {
			return &tollgatev1.DecideRequest{Decision: &tollgatev1.DecideRequest_Revoke{Revoke: &tollgatev1.Revoke{Reason: r}}}
		})
}

func newRequestEvidenceCmd(g *globals) *cobra.Command {
	return textVerb(g, "request-evidence ASK --what TEXT", "Ask the requester for more evidence before you decide",
		"The ask waits for the requester to attach evidence (approvectl evidence);\nits deadline keeps running. At most three rounds per ask.",
		"what", "say what you need to see", func(w string) *tollgatev1.DecideRequest {
			return &tollgatev1.DecideRequest{Decision: &tollgatev1.DecideRequest_RequestEvidence{RequestEvidence: &tollgatev1.RequestEvidence{What: w}}}
		})
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
		Args: askArgs(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.DecideResponse, error) {
				return c.approvals.Decide(ctx, &tollgatev1.DecideRequest{AskId: args[0],
					Decision: &tollgatev1.DecideRequest_Amend{Amend: &tollgatev1.Amend{Field: args[1], NewValueJson: args[2], Reason: reason}}})
			}, func(resp *tollgatev1.DecideResponse) any {
				return askPacketJSON(resp.GetAsk(), g.cfg.Now())
			}, func(w io.Writer, resp *tollgatev1.DecideResponse) error {
				fmt.Fprintf(w, "%s: %s is now %s; the payload digest is %s (approve again)\n", args[0], args[1], args[2], resp.GetAsk().GetPayloadDigest())
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

// parseUntil reads a date (2006-01-02, end of that day UTC), an RFC 3339
// time, or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.Add(24*time.Hour - time.Second), nil
	}
	return time.Time{}, fmt.Errorf("--until %q: want 2006-01-02, an RFC 3339 time, or a duration such as 720h", s)
}

func newStandingCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "standing",
		Short: "List standing approvals (approve --until), or revoke one",
		Long: `List the standing approvals in force: each approves later asks within its
scope by itself until its date, and every such approval names it. --all
includes revoked and expired ones. "standing revoke ID --reason TEXT" ends one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.ListExceptionsResponse, error) {
				return c.approvals.ListExceptions(ctx, &tollgatev1.ListExceptionsRequest{IncludeInactive: all})
			}, func(resp *tollgatev1.ListExceptionsResponse) any {
				type row struct {
					ID        string `json:"id"`
					Scope     string `json:"scope"`
					GrantedBy string `json:"granted_by"`
					Until     string `json:"until"`
					AskID     string `json:"ask_id"`
					Revoked   bool   `json:"revoked"`
					RevokedBy string `json:"revoked_by,omitempty"`
				}
				out := struct {
					Standing []row `json:"standing"`
				}{Standing: []row{}}
				for _, x := range resp.GetExceptions() {
					out.Standing = append(out.Standing, row{x.GetId(), x.GetScope(), x.GetGrantedBy(), x.GetUntil().AsTime().Format(time.RFC3339), x.GetAskId(), x.GetRevoked(), x.GetRevokedBy()})
				}
				return out
			}, func(w io.Writer, resp *tollgatev1.ListExceptionsResponse) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID	SCOPE	BY	UNTIL	STATE")
				for _, x := range resp.GetExceptions() {
					state := "active"
					if x.GetRevoked() {
						state = "revoked by " + x.GetRevokedBy()
					} else if !x.GetUntil().AsTime().After(g.cfg.Now()) {
						state = "expired"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.GetId(), x.GetScope(), x.GetGrantedBy(), x.GetUntil().AsTime().Local().Format("2006-01-02 15:04"), state)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include revoked and expired ones")
	var reason string
	revoke := &cobra.Command{
		Use:   "revoke ID --reason TEXT",
		Short: "Revoke a standing approval: the next matching ask asks a person again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErr("revoke needs --reason: say why, it is recorded")
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.RevokeExceptionResponse, error) {
				return c.approvals.RevokeException(ctx, &tollgatev1.RevokeExceptionRequest{ExceptionId: args[0], Reason: reason})
			}, func(resp *tollgatev1.RevokeExceptionResponse) any {
				return map[string]any{"id": resp.GetException().GetId(), "revoked": true, "revoked_by": resp.GetException().GetRevokedBy()}
			}, func(w io.Writer, resp *tollgatev1.RevokeExceptionResponse) error {
				fmt.Fprintf(w, "%s revoked by %s\n", resp.GetException().GetId(), resp.GetException().GetRevokedBy())
				return nil
			})
		},
	}
	revoke.Flags().StringVar(&reason, "reason", "", "why (required, recorded)")
	cmd.AddCommand(revoke)
	return cmd
}

func newEvidenceCmd(g *globals) *cobra.Command {
	var note string
	cmd := &cobra.Command{
		Use:   "evidence ASK FILE...",
		Short: "Attach the evidence a decider asked for (requester only)",
		Long: `Attach files to an ask that asked for evidence. The ask is pending again,
with a new evidence digest; approvals given before no longer count.`,
		Args: askArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &tollgatev1.AttachEvidenceRequest{AskId: args[0], Note: note}
			for _, f := range args[1:] {
				b, err := os.ReadFile(f)
				if err != nil {
					return usageErr("%s", err)
				}
				req.Artifacts = append(req.Artifacts, &tollgatev1.EvidenceUpload{Name: filepath.Base(f), MediaType: mime.TypeByExtension(filepath.Ext(f)), Content: b})
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.AttachEvidenceResponse, error) {
				return c.approvals.AttachEvidence(ctx, req)
			}, func(resp *tollgatev1.AttachEvidenceResponse) any {
				return askPacketJSON(resp.GetAsk(), g.cfg.Now())
			}, func(w io.Writer, resp *tollgatev1.AttachEvidenceResponse) error {
				fmt.Fprintf(w, "%s: %d artifact(s) attached; the ask is %s again; evidence digest %s\n", args[0], len(req.Artifacts),
					askWord(resp.GetAsk().GetState()), resp.GetAsk().GetEvidenceDigest())
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "a note for the deciders")
	return cmd
}

func newDelegateCmd(g *globals) *cobra.Command {
	var to, reason string
	cmd := &cobra.Command{
		Use:   "delegate ASK --to WHO --reason TEXT",
		Short: "Hand your decision on an ask to someone policy lets decide it",
		Args:  askArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" || strings.TrimSpace(reason) == "" {
				return usageErr("delegate needs --to and --reason")
			}
			return g.decide(cmd, &tollgatev1.DecideRequest{AskId: args[0],
				Decision: &tollgatev1.DecideRequest_Delegate{Delegate: &tollgatev1.Delegate{To: to, Reason: reason}}})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "who decides instead (required)")
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

Without TEXT, prompt for replies until one selects or drops.

Exit 0 when a reply selected an option, answered, dropped the run or showed
the menu; 1 when it matched nothing (nothing is recorded; the options are
shown); 2 when the input ended before any reply.`,
		Args: askArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.session(cmd, func(ctx context.Context, c *client) error {
				// An answer that approves binds the payload and evidence shown:
				// the ask's as read before the first reply.
				shown, err := c.approvals.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: args[0]})
				if err != nil {
					return rpcErr(err)
				}
				send := func(text string) (*tollgatev1.AnswerResponse, error) {
					resp, err := c.approvals.Answer(ctx, &tollgatev1.AnswerRequest{AskId: args[0], Text: text,
						ExpectedPayloadDigest: shown.GetAsk().GetPayloadDigest(), ExpectedEvidenceDigest: shown.GetAsk().GetEvidenceDigest()})
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
					resp, err := send(args[1])
					if err != nil {
						return err
					}
					return matchedNothing(resp)
				}
				if g.cfg.Stdin == nil {
					return usageErr("give the reply as TEXT (no terminal to prompt on)")
				}
				sc := bufio.NewScanner(g.cfg.Stdin)
				// A reply may be as long as any value (limits.MaxValueBytes);
				// a longer line is said to be so, never dropped in silence.
				sc.Buffer(make([]byte, 0, 64<<10), limits.MaxValueBytes+1)
				var last *tollgatev1.AnswerResponse
				for {
					fmt.Fprint(g.cfg.Stderr, "> ")
					if !sc.Scan() {
						if err := sc.Err(); err != nil {
							return usageErr("the reply: %v (a reply is at most %s)", err, limits.Size(limits.MaxValueBytes))
						}
						if last == nil {
							return usageErr("the input ended before any reply: nothing was recorded (give the reply as TEXT)")
						}
						return matchedNothing(last)
					}
					resp, err := send(sc.Text())
					if err != nil {
						return err
					}
					last = resp
					switch resp.GetKind() {
					case tollgatev1.AnswerKind_ANSWER_KIND_SELECTED, tollgatev1.AnswerKind_ANSWER_KIND_DROPPED:
						return nil
					}
				}
			})
		},
	}
}

// matchedNothing is the exit of a reply that matched no option: refused
// (1), nothing recorded; any other reply succeeded.
func matchedNothing(resp *tollgatev1.AnswerResponse) error {
	switch resp.GetKind() {
	case tollgatev1.AnswerKind_ANSWER_KIND_NO_MATCH, tollgatev1.AnswerKind_ANSWER_KIND_ESCAPE_HINT:
		return &exitError{code: ExitRefused, err: errors.New("the reply matched no option: nothing was recorded")}
	}
	return nil
}
