package approvectl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tollgate-dev/tollgate/client/gates"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// Exit codes of `gate` (and `grant verify`), beyond the common ones.
const (
	ExitRejected  = 5 // the gate was rejected; the run is rejected
	ExitExpired   = 6 // the gate's deadline passed first
	ExitCancelled = 7 // the run was cancelled while the gate waited
	ExitPending   = 8 // --no-wait: the gate waits for a person
)

var outcomeExit = map[gates.Outcome]int{gates.Approved: ExitOK, gates.Rejected: ExitRejected, gates.Expired: ExitExpired,
	gates.Cancelled: ExitCancelled, gates.Pending: ExitPending}

// runFlag is --run, defaulting to $TOLLGATE_RUN so a script exports the
// id once.
func (g *globals) runFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "run", "", "the external run (default $TOLLGATE_RUN)")
}

func (g *globals) runID(v string) string {
	if v != "" {
		return v
	}
	return g.cfg.Getenv("TOLLGATE_RUN")
}

func newGateCmd(g *globals) *cobra.Command {
	var (
		summary, run, runName, expires, payload, payloadFile, action, grantOut, onExpiry string
		artifacts, approvers                                                             []string
		quorum                                                                           int
		noWait                                                                           bool
	)
	cmd := &cobra.Command{
		Use:   "gate NAME --summary TEXT [--artifact FILE]… [--run RUN] [--approvers WHO] [--expires D] [--no-wait]",
		Short: "Stop a script at a gate until a person decides",
		Long: `gate opens the gate NAME on an external run and waits until a person decides
it. Without --run (or $TOLLGATE_RUN) it creates the run. The run id is
printed on stdout, so a script can keep it for later gates and steps:

    export TOLLGATE_RUN=$(approvectl gate claims --summary "Review the claims" --artifact claims.txt)

While it waits, the run shows parked (never failed) and a live line on stderr
says who may decide and until when. A gate already on the run is not asked
again: its decision is returned at once.

Artifacts are shown to the approver and their digests bound into the
decision. An approved gate yields a grant for its payload (--payload, or the
artifacts' digests); --grant-out FILE writes it for the service that acts,
which checks it with 'approvectl grant verify'.

Policy decides who may approve, as for any ask, under the action gate.NAME
(rows may name gate.* for every gate); never the gate's own requester, nor
anyone acting for her. A gate nobody else could decide is refused when it
opens, with the policy rows to add and the file to edit (in dev mode,
$TOLLGATE_HOME/dev/policy.csv, where alice and bob review each other's
gates). --action SERVER.TOOL adds a bar (that action's policy must hold
too) and --approvers names roles or people within it.

Exit codes: 0 approved; 5 rejected; 6 expired; 7 cancelled; 8 --no-wait and
still waiting; 1 refused (another gate waits, the run ended, no policy rule
for the action, not your run); 2 bad usage; 3 the control plane could not be
reached.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if strings.TrimSpace(summary) == "" {
				return usageErr("gate %s: --summary is required (what the approver decides)", name)
			}
			if id := g.runID(run); id != "" {
				if err := runArg(id); err != nil {
					return err
				}
			}
			o := gates.Options{RunName: runName, Summary: summary, Action: action, Approvers: approvers, Quorum: quorum, OnExpiry: onExpiry, NoWait: noWait}
			if expires != "" {
				d, err := time.ParseDuration(expires)
				if err != nil || d <= 0 {
					return usageErr("--expires %q: want a positive duration such as 30m or 72h", expires)
				}
				o.Expires = d
			}
			for _, path := range artifacts {
				b, err := os.ReadFile(path)
				if err != nil {
					return usageErr("--artifact: %v", err)
				}
				o.Artifacts = append(o.Artifacts, gates.Artifact{Name: filepath.Base(path), MediaType: mediaType(path, b), Content: b})
			}
			p, err := payloadArg(payload, payloadFile)
			if err != nil {
				return err
			}
			o.Payload = p
			return g.session(cmd, func(ctx context.Context, c *client) error {
				gc := gates.New(c.conn)
				line := g.liveLine()
				o.Progress = func(d gates.Decision) { line.show(waitingLine(d, g.cfg.Now(), line.term)) }
				d, err := gc.Gate(ctx, g.runID(run), name, o)
				line.done()
				if err != nil {
					// The server's refusal as it said it (which rows to add
					// to which policy file), not the client's wrapping of
					// the raw transport error.
					var st interface {
						error
						GRPCStatus() *status.Status
					}
					if errors.As(err, &st) {
						err = st
					}
					return rpcErr(err)
				}
				return g.reportGate(d, grantOut)
			})
		},
	}
	cmd.Flags().StringVar(&summary, "summary", "", "what the approver decides (required)")
	cmd.Flags().StringArrayVar(&artifacts, "artifact", nil, "file the approver reads; its digest is bound into the decision (repeatable)")
	g.runFlag(cmd, &run)
	cmd.Flags().StringVar(&runName, "name", "script", "name of a run this gate creates")
	cmd.Flags().StringSliceVar(&approvers, "approvers", nil, "who may decide: a role of the policy, and/or people (comma-separated)")
	cmd.Flags().IntVar(&quorum, "quorum", 0, "distinct people who must approve (the policy's quorum if larger)")
	cmd.Flags().StringVar(&expires, "expires", "", "how long the gate waits, e.g. 30m (default: the control plane's)")
	cmd.Flags().StringVar(&onExpiry, "on-expiry", "", "what expiry does to the run: (default) expire, reject or cancel")
	cmd.Flags().StringVar(&payload, "payload", "", "the action's args as a JSON object: what the grant binds (default: the artifacts' digests)")
	cmd.Flags().StringVar(&payloadFile, "payload-file", "", "read --payload from this file")
	cmd.Flags().StringVar(&action, "action", "", "a further action, SERVER.TOOL, whose policy must hold too (the gate is always decided under gate.NAME)")
	cmd.Flags().StringVar(&grantOut, "grant-out", "", "when approved, write the grant (JSON) to this file")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "open the gate and return at once (exit 8 while it waits)")
	return cmd
}

// reportGate prints the run id (stdout) and the outcome (stderr), writes
// the grant, and exits with the outcome's code.
func (g *globals) reportGate(d gates.Decision, grantOut string) error {
	if grantOut != "" && d.Grant != nil {
		b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(wire.Grant(d.Grant))
		if err != nil {
			return err
		}
		if err := os.WriteFile(grantOut, append(b, '\n'), 0o600); err != nil {
			return &exitError{code: ExitInternal, err: fmt.Errorf("write grant: %w", err)}
		}
	}
	if g.json() {
		if err := g.printJSON(map[string]any{"run_id": d.RunID, "gate": d.Gate, "outcome": d.Outcome, "actor": d.Actor,
			"at": d.At, "reason": d.Reason, "asked_again": false, "created": d.Created, "grant": d.Grant != nil}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(g.cfg.Stdout, d.RunID)
	}
	var msg string
	was := ""
	if !d.Created && d.Outcome != gates.Pending {
		was = " (decided before; not asked again)"
	}
	switch d.Outcome {
	case gates.Approved:
		fmt.Fprintf(g.cfg.Stderr, "gate %s: approved by %s at %s%s\n", d.Gate, d.Actor, d.At.UTC().Format(time.RFC3339), was)
		return nil
	case gates.Rejected:
		msg = fmt.Sprintf("gate %s: rejected by %s: %s", d.Gate, d.Actor, d.Reason)
	case gates.Expired:
		msg = fmt.Sprintf("gate %s: expired undecided: %s", d.Gate, d.Reason)
	case gates.Cancelled:
		msg = fmt.Sprintf("gate %s: cancelled: %s", d.Gate, d.Reason)
	case gates.Pending:
		msg = fmt.Sprintf("gate %s: waiting for a person (%s)", d.Gate, d.Ask.GetAnswerCommand())
	}
	msg += was
	fmt.Fprintf(g.cfg.Stderr, "approvectl: %s\n", msg)
	return &exitError{code: outcomeExit[d.Outcome], err: errors.New(msg), printed: true}
}

// waitingLine is the line while a gate waits. On a terminal (live) it
// counts the wait and the time left, redrawn in place; into a pipe or a
// log it says only what changes with the gate — whom it waits for and
// its deadline — so a line is printed when something changed, not every
// poll.
func waitingLine(d gates.Decision, now time.Time, live bool) string {
	a := d.Ask
	who := "a person policy allows"
	if desc := a.GetAuthorityRequired().GetDescription(); desc != "" {
		who = desc
	}
	if !live {
		return fmt.Sprintf("gate %s: parked, waiting for %s; expires at %s · approvectl approve %s",
			d.Gate, who, a.GetExpiresAt().AsTime().UTC().Format(time.RFC3339), a.GetId())
	}
	return fmt.Sprintf("gate %s: parked, waiting %s for %s; expires %s · approvectl approve %s",
		d.Gate, now.Sub(a.GetCreatedAt().AsTime()).Round(time.Second), who, dueIn(a.GetExpiresAt().AsTime(), now), a.GetId())
}

func newStepCmd(g *globals) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "step NAME [--run RUN] -- COMMAND [ARG]…",
		Short: "Run a script step once per run, journaled",
		Long: `step runs COMMAND as the step NAME of an external run and records it in the
run's journal: exit status, output digest and duration. Run again for the
same run, a step that succeeded is skipped (and says so), so a script re-run
after an approval does not redo the work done before the gate.

The command's output passes through; its exit status is step's. A step is
refused before it runs while a gate of the run waits, or after the run ended.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if cmd.ArgsLenAtDash() != 1 {
				return usageErr("step %s: put the command after --, e.g. approvectl step extract -- ./extract.sh", name)
			}
			runID := g.runID(run)
			if runID == "" {
				return usageErr("step %s: --run RUN (or $TOLLGATE_RUN) is required", name)
			}
			if err := runArg(runID); err != nil {
				return err
			}
			return g.session(cmd, func(ctx context.Context, c *client) error {
				resp, err := c.runs.GetRun(ctx, &tollgatev1.GetRunRequest{RunId: runID})
				if err != nil {
					return rpcErr(err)
				}
				r := resp.GetRun()
				if done, at := gates.StepDoneIn(r, name); done {
					fmt.Fprintf(g.cfg.Stderr, "step %s: already completed at %s; skipped\n", name, at.UTC().Format(time.RFC3339))
					return nil
				}
				switch r.GetState() {
				case tollgatev1.RunState_RUN_STATE_PARKED:
					return &exitError{code: ExitRefused, err: fmt.Errorf("step %s: run %s is parked at a gate; it must be decided first:\n%s", name, runID, r.GetResumeCommand())}
				case tollgatev1.RunState_RUN_STATE_RUNNING:
				default:
					return &exitError{code: ExitRefused, err: fmt.Errorf("step %s: run %s is %s: %s", name, runID, stateWord(r.GetState()), r.GetStateReason())}
				}
				start := g.cfg.Now()
				exit, digest, err := runCommand(ctx, args[1:], g.cfg)
				if err != nil {
					return &exitError{code: ExitUsage, err: fmt.Errorf("step %s: %w", name, err)}
				}
				end := g.cfg.Now()
				err = gates.New(c.conn).RecordStep(ctx, runID, name, exit, digest, start, end)
				if errors.Is(err, gates.ErrStepDone) {
					fmt.Fprintf(g.cfg.Stderr, "step %s: recorded by another run of the script meanwhile\n", name)
				} else if err != nil {
					return rpcErr(err)
				}
				fmt.Fprintf(g.cfg.Stderr, "step %s: exit %d in %s (output %s)\n", name, exit, end.Sub(start).Round(time.Millisecond), digest)
				if exit != 0 {
					return &exitError{code: exit, err: fmt.Errorf("step %s: exit status %d", name, exit), printed: true}
				}
				return nil
			})
		},
	}
	g.runFlag(cmd, &run)
	return cmd
}

// runCommand runs argv with the process's stdin, its stdout and stderr
// passed through and digested (stdout then stderr). An error means it
// could not start; a non-zero exit is returned as the status.
func runCommand(ctx context.Context, argv []string, cfg Config) (int, string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = cfg.Stdin
	cmd.Stdout = io.MultiWriter(cfg.Stdout, &out)
	cmd.Stderr = io.MultiWriter(cfg.Stderr, &errb)
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code := ee.ExitCode()
		if code < 0 {
			code = 128 // killed by a signal
		}
		return code, freshness.ContentDigest(append(out.Bytes(), errb.Bytes()...)), nil
	case err != nil:
		return 0, "", err
	}
	return 0, freshness.ContentDigest(append(out.Bytes(), errb.Bytes()...)), nil
}

func newBeginCmd(g *globals) *cobra.Command {
	var name, key string
	cmd := &cobra.Command{
		Use:   "begin --request-id KEY [--name NAME]",
		Short: "Create a script's external run (or find it again) and print its id",
		Long: `begin creates an external run for a script that does work before its first
gate, and prints the run id. The same --request-id returns the same run, so a
script re-run after an approval finds its run and skips what it already did:

    export TOLLGATE_RUN=$(approvectl begin --request-id "claims-$TICKET" --name claims-review)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if key == "" {
				return usageErr("begin: --request-id KEY is required (a re-run finds its run by it)")
			}
			type created struct {
				id  string
				new bool
			}
			return call(g, cmd, func(ctx context.Context, c *client) (created, error) {
				id, isNew, err := gates.New(c.conn).CreateRun(ctx, key, name)
				return created{id, isNew}, err
			}, func(r created) any {
				return map[string]any{"run_id": r.id, "created": r.new}
			}, func(w io.Writer, r created) error {
				fmt.Fprintln(w, r.id)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "script", "name of the run")
	cmd.Flags().StringVar(&key, "request-id", "", "idempotency key: the same key finds the same run")
	return cmd
}

func newFinishCmd(g *globals) *cobra.Command {
	var run, failed, reason string
	cmd := &cobra.Command{
		Use:   "finish [--run RUN] [--failed REASON]",
		Short: "End an external run: complete, or failed with a reason",
		Long: `finish ends the script's external run complete (or, with --failed REASON,
failed). Refused while a gate waits: cancel the run instead
(approvectl runs cancel RUN).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			runID := g.runID(run)
			if runID == "" {
				return usageErr("finish: --run RUN (or $TOLLGATE_RUN) is required")
			}
			if err := runArg(runID); err != nil {
				return err
			}
			why := reason
			if failed != "" {
				why = failed
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.Run, error) {
				return gates.New(c.conn).Finish(ctx, runID, failed != "", why)
			}, func(r *tollgatev1.Run) any {
				return map[string]any{"run_id": r.GetId(), "state": stateWord(r.GetState()), "reason": r.GetStateReason()}
			}, func(w io.Writer, r *tollgatev1.Run) error {
				fmt.Fprintf(w, "run %s %s: %s\n", r.GetId(), stateWord(r.GetState()), r.GetStateReason())
				return nil
			})
		},
	}
	g.runFlag(cmd, &run)
	cmd.Flags().StringVar(&failed, "failed", "", "end the run failed, for this reason")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

func newGrantCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "grant", Short: "Check grants where an effect is performed"}
	var grantFile, payload, payloadFile, ledger, action string
	var keys, artifacts []string
	verify := &cobra.Command{
		Use:   "verify --grant FILE --key PUB.pem [--action gate.NAME] (--payload JSON | --artifact FILE…)",
		Short: "Refuse to act without a valid, unexpired, unused grant for this action and exact payload",
		Long: `verify checks a grant (as 'approvectl gate --grant-out' wrote it) where the
effect is performed: signed by the control plane's key, not expired, for the
action you are about to perform (--action: gate.NAME of the gate that governs
it; default gate.NAME of the gate the grant names — pass it, so a grant of
another gate is refused), for this exact payload (--payload, or the
artifacts, as the gate bound them), and not used before. An accepted grant
is recorded in the ledger so a replay is refused.

The ledger is the verifier's memory: a replay is refused only by verifiers
that share it. The default, a file ($TOLLGATE_HOME/grant-ledger.json), is one
host's memory; a verifier on another host, or given another --ledger file,
accepts the same grant again. Services that act on one grant from several
hosts or processes share a Redis ledger, --ledger redis://HOST:PORT/DB (or
rediss://…, unix:///PATH): one atomic SET NX PX per check, so of any number
of verifiers exactly one accepts a grant. The Redis must keep an append-only
file (a restart would forget used grants). A ledger that cannot be read
refuses the grant.

Exit codes: 0 valid (act); 1 refused (do not act), with the reason; 2 bad
usage or unreadable files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grantFile == "" || len(keys) == 0 {
				return usageErr("grant verify: --grant FILE and --key PUB.pem are required")
			}
			b, err := os.ReadFile(grantFile)
			if err != nil {
				return usageErr("--grant: %v", err)
			}
			var pg tollgatev1.Grant
			if err := protojson.Unmarshal(b, &pg); err != nil {
				return usageErr("--grant %s: not a grant: %v", grantFile, err)
			}
			args, err := payloadArg(payload, payloadFile)
			if err != nil {
				return err
			}
			if args == nil {
				digests := map[string]string{}
				for _, path := range artifacts {
					b, err := os.ReadFile(path)
					if err != nil {
						return usageErr("--artifact: %v", err)
					}
					digests[filepath.Base(path)] = freshness.ContentDigest(b)
				}
				if len(digests) == 0 {
					return usageErr("grant verify: give the payload you will act on: --payload JSON or --artifact FILE")
				}
				args = grant.ArtifactsPayload(digests)
			}
			trusted, err := loadKeys(keys)
			if err != nil {
				return err
			}
			if ledger == "" {
				ledger = filepath.Join(g.home(), "grant-ledger.json")
			}
			led, closeLedger, err := openLedger(cmd.Context(), ledger)
			if err != nil {
				return &exitError{code: ExitRefused, err: fmt.Errorf("grant refused: %w: %v", grant.ErrLedger, err)}
			}
			defer closeLedger()
			v := grant.NewVerifierWithLedger(trusted, led)
			gr := wire.GrantFromProto(&pg)
			if action == "" {
				// The verifier names what it is about to do; taking the
				// grant's own word for it would accept a grant for any
				// gate (one a looser policy row lets the script approve).
				return usageErr("grant verify: --action is required: the action you will perform (gate.NAME of the gate that governs it, or SERVER.TOOL); this grant is for %s", gr.Action)
			}
			if err := v.VerifyPayload(gr, action, args, g.cfg.Now()); err != nil {
				return &exitError{code: ExitRefused, err: fmt.Errorf("grant refused: %w", err)}
			}
			if g.json() {
				return g.printJSON(map[string]any{"valid": true, "run_id": gr.RunID, "gate": gr.StepID, "expires_at": gr.ExpiresAt})
			}
			fmt.Fprintf(g.cfg.Stdout, "grant valid: run %s gate %s, payload %s, until %s\n", gr.RunID, gr.StepID, gr.PayloadDigest, gr.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	verify.Flags().StringVar(&grantFile, "grant", "", "the grant file")
	verify.Flags().StringArrayVar(&keys, "key", nil, "the control plane's public grant key, PEM, as ID=FILE or FILE (id \"grant\"); repeatable")
	verify.Flags().StringVar(&payload, "payload", "", "the args you will act on, a JSON object")
	verify.Flags().StringVar(&payloadFile, "payload-file", "", "read --payload from this file")
	verify.Flags().StringArrayVar(&artifacts, "artifact", nil, "the artifact files you will act on (repeatable)")
	verify.Flags().StringVar(&ledger, "ledger", "", "where used grants are remembered: a file (default $TOLLGATE_HOME/grant-ledger.json; this host only) or a Redis shared by every verifier, redis://HOST:PORT/DB")
	verify.Flags().StringVar(&action, "action", "", "the action you will perform (required): gate.NAME of the gate that governs it, or SERVER.TOOL")
	cmd.AddCommand(verify)
	return cmd
}

func payloadArg(payload, file string) ([]byte, error) {
	if file != "" {
		if payload != "" {
			return nil, usageErr("--payload and --payload-file: give one")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErr("--payload-file: %v", err)
		}
		payload = string(b)
	}
	payload = strings.TrimSpace(payload)
	if payload == "" {
		return nil, nil
	}
	if !strings.HasPrefix(payload, "{") {
		return nil, usageErr("--payload: want a JSON object, got %.40q", payload)
	}
	return []byte(payload), nil
}

func mediaType(path string, b []byte) string {
	if t := mime.TypeByExtension(filepath.Ext(path)); t != "" {
		return t
	}
	if bytes.IndexByte(b, 0) < 0 {
		return "text/plain"
	}
	return "application/octet-stream"
}

// gateLine shows the waiting gate: one line redrawn in place on a
// terminal, a plain line per change otherwise.
type gateLine struct {
	w    io.Writer
	term bool
	last string
}

func (g *globals) liveLine() *gateLine {
	return &gateLine{w: g.cfg.Stderr, term: g.cfg.Terminal(g.cfg.Stderr)}
}

func (l *gateLine) show(s string) {
	if l.term {
		io.WriteString(l.w, clearLine+fit(s, 119))
		l.last = s
		return
	}
	if s != l.last {
		fmt.Fprintln(l.w, s)
		l.last = s
	}
}

func (l *gateLine) done() {
	if l.term && l.last != "" {
		io.WriteString(l.w, "\n")
	}
}
