package approvectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// Exit codes scripts can rely on.
const (
	ExitOK       = 0 // success
	ExitRefused  = 1 // the input was read and refused (e.g. the recipe does not compile)
	ExitUsage    = 2 // bad flags or arguments, or an input that could not be read
	ExitInternal = 3 // anything else
)

// Config carries what the command needs from its process.
type Config struct {
	Stdout io.Writer
	Stderr io.Writer
	Stdin  io.Reader           // for interactive answers; nil means none
	Getenv func(string) string // nil means os.Getenv
	Now    func() time.Time    // the clock ages and waits are read against; nil means time.Now
	// Terminal reports whether w is a terminal (run --wait then redraws
	// one progress line in place); nil means: a character device.
	Terminal func(w io.Writer) bool
	// ConfigDir is where approvectl keeps its token cache
	// (ConfigDir/tollgate/tokens/); "" means os.UserConfigDir().
	ConfigDir string
	// OpenBrowser opens url for approvectl login --browser; nil means the
	// platform's opener (xdg-open, open, rundll32), run without a shell.
	OpenBrowser func(url string) error
}

// exitError carries an exit code; its message has already been printed
// when printed is true.
type exitError struct {
	code    int
	err     error
	printed bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// askArgs checks positional arguments with n (a cobra rule) and then that
// the first names an ask, RUN/STOP: anything else is bad usage (exit 2),
// not a refusal.
func askArgs(n cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := n(cmd, args); err != nil {
			return err
		}
		run, stop, ok := strings.Cut(args[0], "/")
		if !ok || run == "" || stop == "" {
			return usageErr("%q is not an ask: an ask is RUN/STOP, such as r_k2v8…/ask_1 (approvectl asks lists yours)", limits.Short(args[0]))
		}
		return nil
	}
}

// runArg checks a run id given where a verb wants one: an ask id
// (RUN/STOP), an empty id or one with spaces is bad usage (exit 2), not a
// refusal; the server judges the rest.
func runArg(id string) error {
	if run, _, ok := strings.Cut(id, "/"); ok && run != "" {
		return usageErr("%q is an ask, not a run: its run is %s", limits.Short(id), limits.Short(run))
	}
	if id == "" || strings.ContainsAny(id, "/ \t\n") {
		return usageErr("%q is not a run id: a run id is like r_k2v8… (approvectl runs lists yours)", limits.Short(id))
	}
	return nil
}

// runArgs checks positional arguments with n, then that the first is a
// run id (runArg).
func runArgs(n cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := n(cmd, args); err != nil {
			return err
		}
		return runArg(args[0])
	}
}

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// ExitCode maps Run's error to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitInternal
}

// Run executes approvectl with args (without the program name). Errors are
// printed to cfg.Stderr before Run returns them.
func Run(ctx context.Context, args []string, cfg Config) error {
	root := &cobra.Command{
		Use:   "approvectl",
		Short: "Plan, run, answer and audit Tollgate workflows",
		Long: `approvectl is the command line of Tollgate: it compiles recipes and shows
their plan card, and (with a control plane) starts runs, saves skills and
schedules their runs, lists the asks you may decide, decides them and reads
the journal.

Global flags choose the server (--server, $TOLLGATE_SERVER, default
127.0.0.1:7443; --ca for a private CA) and who you are (--token, $TOLLGATE_TOKEN, or --as NAME for
the tokens a --dev control plane mints; else the token approvectl login cached for
the server). -o json prints JSON for scripts.

Exit codes: 0 success; 1 refused (the recipe does not compile, the server
said no: already decided, expired, permission denied…); 2 bad usage or
unreadable input; 3 the call did not get through (the control plane
cannot be reached: start it, or check --server / $TOLLGATE_SERVER), or
anything else;
4 (run --wait) the run ended without completing; 8 (run --wait) the run
is parked, waiting for a person (as gate --no-wait on a waiting gate);
9 (run --wait) the run is blocked: no connected executor offers what its
steps need (runs show RUN says which).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(cfg.Stdout)
	root.SetErr(cfg.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: ExitUsage, err: err} })
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Terminal == nil {
		cfg.Terminal = isTerminal
	}
	g := &globals{cfg: cfg}
	root.PersistentFlags().StringVar(&g.server, "server", "", "control plane address (default $TOLLGATE_SERVER or "+DefaultServer+")")
	root.PersistentFlags().StringVar(&g.token, "token", "", "bearer token (default $TOLLGATE_TOKEN)")
	root.PersistentFlags().StringVar(&g.ca, "ca", "", "CA bundle (PEM) of the server's certificate: TLS with these roots, loopback too — a kubectl port-forward (default $TOLLGATE_CA; without it: TLS with the system roots off loopback, plain TCP on it)")
	root.PersistentFlags().StringVar(&g.serverName, "tls-server-name", "", "name to check the server's certificate against instead of the --server host (default $TOLLGATE_TLS_SERVER_NAME)")
	root.PersistentFlags().StringVar(&g.as, "as", "", "use the dev token of this user (alice, bob, carol, dave)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.output != "text" && g.output != "json" {
			return usageErr("-o must be text or json, not %q", g.output)
		}
		return nil
	}
	root.AddCommand(newPlanCmd(g), newRunCmd(g), newRunsCmd(g), newAsksCmd(g), newApproveCmd(g), newRejectCmd(g), newAmendCmd(g), newRevokeCmd(g), newStandingCmd(g), newWatchCmd(g), newRequestEvidenceCmd(g), newEvidenceCmd(g), newDelegateCmd(g), newAnswerCmd(g), newAuditCmd(g), newBeginCmd(g), newGateCmd(g), newStepCmd(g), newFinishCmd(g), newGrantCmd(g), newLoginCmd(g), newWhoamiCmd(g), newLogoutCmd(g), newSkillsCmd(g), newSchedulesCmd(g), newMCPCmd(g))
	err := root.ExecuteContext(ctx)
	if err == nil {
		return nil
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		// cobra's own argument errors (unknown command, arg counts) are usage errors
		ee = &exitError{code: ExitUsage, err: err}
		if ctx.Err() != nil {
			ee.code = ExitInternal
		}
	}
	if !ee.printed {
		fmt.Fprintf(cfg.Stderr, "approvectl: %v\n", ee.err)
	}
	return ee
}
