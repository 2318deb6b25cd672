package approvectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// run --wait's exit codes besides ExitOK (the run completed, or ended
// partial) and the errors' (ExitRefused, ExitUsage, ExitInternal).
const (
	// ExitNotComplete: the run ended any way but complete or partial.
	ExitNotComplete = 4
	// ExitParked: the run waits for a person (an open ask): the code
	// `gate --no-wait` exits with for a gate that waits (ExitPending).
	ExitParked = ExitPending
	// ExitBlocked: the run waits for an executor that offers what its
	// steps need.
	ExitBlocked = 9
)

func newRunCmd(g *globals) *cobra.Command {
	var wait bool
	var requestID string
	var inputs []string
	cmd := &cobra.Command{
		Use:   "run PATH|SKILL[@VERSION]",
		Short: "Start a run of a recipe file, a skill folder, or a skill by name",
		Long: `Start a run. PATH is a recipe file, a SKILL.md or a skill folder, compiled by the
control plane against its live tool catalog; anything else is the name of a
skill the control plane knows (approvectl skills list): its latest version,
or SKILL@VERSION for that version.

With --wait, follow the run until it ends, parks or is blocked, showing its
progress: steps done of the steps the run has reached (joins and a gate's
fact checks are not counted), how many more wait behind a gate, the steps
under way, and each question it waits on (ask id and title) with the
command that answers it. On a terminal the progress is one line redrawn in
place; when stdout is a pipe or a file it is plain lines, one each time
something changed, e.g.

  14:02:07  running  steps 0/3  queued cpu, mem
  14:02:07  running  steps 2/3  now brief
  14:02:08  parked  steps 3/3, 1 behind a gate  waiting on r_538q…/ask_1
  14:02:08  ask r_538q…/ask_1 "save this reading?"
  14:02:08    answer: approvectl approve r_538q…/ask_1   or   approvectl reject …

then it prints how the run stands and the commands that answer its asks;
a blocked run also says which steps wait for which server.tool (or label)
and what the connected executors offer. An ask a standing approval decides
as it opens is not reported as waiting: the run goes on. With -o json it
prints only the run at the end.

Exit codes with --wait: 0 the run completed (or ended partial: some branch
failed, every join held); 4 it ended without completing (failed, rejected,
expired, cancelled); 8 it is parked: it waits for a person to answer an ask
(the same code as gate --no-wait); 9 it is blocked: it waits for an executor
that offers what its steps need. Without --wait, 0 once the run started.`,
		Example: `  approvectl --as alice run graph-ask-demo --wait
  approvectl --as alice run graph-ask-demo --wait | tee run.log
  approvectl run ./my-skill --request-id deploy-42
  approvectl run ./greet.md --input who=bob`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &tollgatev1.StartRunRequest{RequestId: requestID}
			for _, kv := range inputs {
				name, value, ok := strings.Cut(kv, "=")
				if !ok {
					return usageErr("--input %q: want NAME=VALUE", kv)
				}
				if req.Inputs == nil {
					req.Inputs = map[string]string{}
				}
				req.Inputs[name] = value
			}
			if _, err := os.Stat(args[0]); err == nil {
				src, _, name, err := readRecipe(args[0])
				if err != nil {
					return &exitError{code: ExitUsage, err: err}
				}
				req.Source, req.Name = &tollgatev1.StartRunRequest_Recipe{Recipe: src}, name
			} else {
				name, v, pinned := strings.Cut(args[0], "@")
				req.Source = &tollgatev1.StartRunRequest_Skill{Skill: name}
				if pinned {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil || n < 1 {
						return usageErr("%q: the version after @ is a number from 1 (approvectl skills history %s lists them)", limits.Short(args[0]), limits.Short(name))
					}
					req.SkillVersion = n
				}
			}
			return g.session(cmd, func(ctx context.Context, c *client) error {
				resp, err := c.runs.StartRun(ctx, req)
				if err != nil {
					return rpcErr(err)
				}
				run := resp.GetRun()
				if !wait {
					if g.json() {
						return g.printJSON(runJSON(run, g.cfg.Now()))
					}
					verb := "started"
					if !resp.GetCreated() {
						verb = "already started by this request id"
					}
					fmt.Fprintf(g.cfg.Stdout, "run %s %s: %s\n", run.GetId(), verb, stateWord(run.GetState()))
					writeBlocked(g.cfg.Stdout, run)
					printResume(g.cfg.Stdout, run)
					return nil
				}
				return g.follow(ctx, c, run.GetId())
			})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the run until it ends or parks")
	cmd.Flags().StringVar(&requestID, "request-id", "", "idempotency key: starting the same again with it returns the same run; another recipe, skill or inputs under it is refused")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "NAME=VALUE: an input the recipe reads as {NAME} (repeatable)")
	return cmd
}

// follow watches a run until it is terminal, parked or blocked.
func (g *globals) follow(ctx context.Context, c *client, id string) error {
	stream, err := c.runs.WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: id})
	if err != nil {
		return rpcErr(err)
	}
	var last *tollgatev1.Run
	var show progress
	if !g.json() {
		show = g.newProgress(g.cfg.Stdout)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if show != nil {
				show.end()
			}
			return rpcErr(err)
		}
		run := ev.GetEvent().GetRun()
		if run.GetState() == tollgatev1.RunState_RUN_STATE_PARKED && (!waitsOnPerson(run) || movedOn(ctx, c, run)) {
			// Parked with no ask open: its asks are decided and the run
			// waits on a machine (the facts re-read before an approval is
			// consumed), not on a person. Or a standing approval decided
			// its ask in the commit after the one that opened it. Either
			// way nobody is to be told to answer it: the watch sends the
			// run's next version.
			continue
		}
		last = run
		if show != nil {
			show.show(run, ev.GetEvent().GetTime().AsTime())
		}
		if st := run.GetState(); terminal(st) || st == tollgatev1.RunState_RUN_STATE_PARKED || st == tollgatev1.RunState_RUN_STATE_BLOCKED {
			break
		}
	}
	if show != nil {
		show.end()
	}
	if last == nil {
		return &exitError{code: ExitInternal, err: fmt.Errorf("the watch of %s ended without news", id)}
	}
	if g.json() {
		if err := g.printJSON(runJSON(last, g.cfg.Now())); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(g.cfg.Stdout, strings.TrimSpace(fmt.Sprintf("run %s: %s %s", last.GetId(), stateWord(last.GetState()), last.GetStateReason())))
		writeBlocked(g.cfg.Stdout, last)
		printResume(g.cfg.Stdout, last)
	}
	return waitOutcome(last)
}

// waitOutcome is run --wait's exit for the run as it was when the watch
// stopped: nil when it completed (or ended partial), else the code saying
// how it stands (its text was printed already).
func waitOutcome(r *tollgatev1.Run) error {
	switch st := r.GetState(); {
	case st == tollgatev1.RunState_RUN_STATE_COMPLETE || st == tollgatev1.RunState_RUN_STATE_PARTIAL:
		return nil
	case terminal(st):
		return &exitError{code: ExitNotComplete, err: fmt.Errorf("run %s ended %s", r.GetId(), stateWord(st)), printed: true}
	case st == tollgatev1.RunState_RUN_STATE_PARKED:
		return &exitError{code: ExitParked, err: fmt.Errorf("run %s is parked: it waits for a person", r.GetId()), printed: true}
	case st == tollgatev1.RunState_RUN_STATE_BLOCKED:
		return &exitError{code: ExitBlocked, err: fmt.Errorf("run %s is blocked: it waits for an executor", r.GetId()), printed: true}
	}
	return nil
}

// waitsOnPerson reports whether one of run's asks is open: pending, back
// with the requester for evidence, or a step in doubt.
func waitsOnPerson(run *tollgatev1.Run) bool {
	for _, a := range run.GetAsks() {
		switch a.GetState() {
		case tollgatev1.AskState_ASK_STATE_PENDING, tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED, tollgatev1.AskState_ASK_STATE_IN_DOUBT:
			return true
		}
	}
	return false
}

// movedOn reports whether run, seen parked, has changed since: a standing
// approval decides an ask in the commit after the one that opened it, so
// a parked run is read once more before anyone is told to answer it. When
// it changed, the watch sends that newer version (or a later one) next. A
// failed read counts as unchanged.
func movedOn(ctx context.Context, c *client, run *tollgatev1.Run) bool {
	resp, err := c.runs.GetRun(ctx, &tollgatev1.GetRunRequest{RunId: run.GetId()})
	return err == nil && resp.GetRun().GetVersion() > run.GetVersion()
}

func stepsDone(r *tollgatev1.Run) (done, total int) {
	c := countSteps(r, r.GetPlan())
	return c.done, c.total
}

func printResume(w io.Writer, r *tollgatev1.Run) {
	if r.GetResumeCommand() != "" {
		fmt.Fprintf(w, "waiting on a person; to answer:\n  %s\n", r.GetResumeCommand())
	}
}
