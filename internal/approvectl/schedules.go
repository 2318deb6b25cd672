package approvectl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

func newSchedulesCmd(g *globals) *cobra.Command {
	var skill string
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Start runs of saved skills on cron expressions",
		Long: `Schedules start runs of saved skills (approvectl skills push) on cron
expressions. A scheduled run is an ordinary run whose requester is the
schedule's run-as identity: its gates park and ask like any other, and a
schedule never approves anything on anyone's behalf. Each tick starts at
most one run, however many control planes serve.

Without a verb, schedules lists them (schedules list). A schedule may run as
its creator; running as anyone else needs the operator role. Its creator,
its run-as identity and operators may change, pause, resume or remove it;
anyone signed in may read schedules.`,
		Example: `  approvectl schedules add nightly --skill greet --cron '0 9 * * 1-5' --tz Europe/Berlin --input who=bob
  approvectl schedules
  approvectl schedules show nightly --next 10
  approvectl schedules pause nightly`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listSchedules(g, cmd, skill) },
	}
	cmd.Flags().StringVar(&skill, "skill", "", "only schedules of this skill")
	var listSkill string
	list := &cobra.Command{
		Use:   "list [--skill SKILL]",
		Short: "List the schedules, by name, with their next tick",
		Long: `List the schedules, by name: the skill each runs (NAME@V when a version is
pinned), its cron expression and time zone, its next tick (local time, and
how soon) or "paused", how many ticks started a run, were skipped (a run was
still live) or missed (later than the grace), and the run its latest started
tick made, with that tick. ERROR marks a schedule whose latest start failed
(approvectl schedules show NAME says why). -o json prints every field of
each (schedules show -o json's shape).`,
		Example: `  approvectl schedules list
  approvectl schedules list --skill greet -o json | jq -r '.schedules[] | select(.last_error != null) | .spec.name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listSchedules(g, cmd, listSkill) },
	}
	list.Flags().StringVar(&listSkill, "skill", "", "only schedules of this skill")
	cmd.AddCommand(newSchedulesAddCmd(g), list, newSchedulesShowCmd(g),
		scheduleStateCmd(g, "pause", "Pause a schedule: its ticks start nothing until it is resumed",
			`Pause a schedule: a tick that comes while it is paused never starts a run,
and is not caught up on resume. The schedule says who paused it and when.`,
			func(ctx context.Context, c *client, name string) (*tollgatev1.Schedule, error) {
				resp, err := c.schedules.PauseSchedule(ctx, &tollgatev1.PauseScheduleRequest{Name: name})
				return resp.GetSchedule(), err
			}, func(w io.Writer, s *tollgatev1.Schedule, now time.Time) {
				fmt.Fprintf(w, "paused %s: its ticks start nothing until approvectl schedules resume %s\n", s.GetSpec().GetName(), s.GetSpec().GetName())
			}),
		scheduleStateCmd(g, "resume", "Resume a paused schedule from now",
			`Resume a paused schedule from now: the ticks that came while it was paused
are not caught up. Prints its next tick.`,
			func(ctx context.Context, c *client, name string) (*tollgatev1.Schedule, error) {
				resp, err := c.schedules.ResumeSchedule(ctx, &tollgatev1.ResumeScheduleRequest{Name: name})
				return resp.GetSchedule(), err
			}, func(w io.Writer, s *tollgatev1.Schedule, now time.Time) {
				next := "none"
				if ts := s.GetNextTicks(); len(ts) > 0 {
					next = stamp(ts[0], now)
				}
				fmt.Fprintf(w, "resumed %s: next tick %s\n", s.GetSpec().GetName(), next)
			}),
		newSchedulesRmCmd(g))
	return cmd
}

// scheduleSpecJSON is a schedule as a person writes it: the fields of
// schedules add -f FILE, and the spec schedules show -o json prints, so
// one can be edited into the other.
type scheduleSpecJSON struct {
	Name         string            `json:"name" yaml:"name"`
	Skill        string            `json:"skill" yaml:"skill"`
	SkillVersion int64             `json:"skill_version,omitempty" yaml:"skill_version"`
	Cron         string            `json:"cron" yaml:"cron"`
	TimeZone     string            `json:"time_zone,omitempty" yaml:"time_zone"`
	Inputs       map[string]string `json:"inputs,omitempty" yaml:"inputs"`
	RunAs        string            `json:"run_as,omitempty" yaml:"run_as"`
	CatchUp      string            `json:"catch_up,omitempty" yaml:"catch_up"`
	Concurrency  string            `json:"concurrency,omitempty" yaml:"concurrency"`
	Grace        string            `json:"grace,omitempty" yaml:"grace"` // a Go duration: 90s, 5m
}

// scheduleFields are the fields of a schedule file, in the order they
// are explained.
var scheduleFields = []string{"name", "skill", "skill_version", "cron", "time_zone", "inputs", "run_as", "catch_up", "concurrency", "grace"}

// scheduleJSON is a schedule for scripts: everything the control plane
// says of it.
type scheduleJSON struct {
	Spec        scheduleSpecJSON `json:"spec"`
	Paused      bool             `json:"paused"`
	PausedBy    string           `json:"paused_by,omitempty"`
	PausedAt    time.Time        `json:"paused_at,omitzero"`
	CreatedBy   string           `json:"created_by"`
	CreatedAt   time.Time        `json:"created_at,omitzero"`
	UpdatedBy   string           `json:"updated_by,omitempty"`
	UpdatedAt   time.Time        `json:"updated_at,omitzero"`
	Version     int64            `json:"version"`
	NextTicks   []time.Time      `json:"next_ticks"`
	LastTick    time.Time        `json:"last_tick,omitzero"`
	LastRun     string           `json:"last_run,omitempty"`
	LastRunTick time.Time        `json:"last_run_tick,omitzero"`
	WaitingTick time.Time        `json:"waiting_tick,omitzero"`
	Started     int64            `json:"started"`
	Skipped     int64            `json:"skipped"`
	Missed      int64            `json:"missed"`
	LastSkip    string           `json:"last_skip,omitempty"`
	LastError   string           `json:"last_error,omitempty"`
}

func scheduleOf(s *tollgatev1.Schedule) scheduleJSON {
	sp := s.GetSpec()
	out := scheduleJSON{Spec: scheduleSpecJSON{Name: sp.GetName(), Skill: sp.GetSkill(), SkillVersion: sp.GetSkillVersion(), Cron: sp.GetCron(),
		TimeZone: sp.GetTimeZone(), Inputs: sp.GetInputs(), RunAs: sp.GetRunAs(), CatchUp: sp.GetCatchUp(), Concurrency: sp.GetConcurrency()},
		Paused: s.GetPaused(), PausedBy: s.GetPausedBy(), PausedAt: tsTime(s.GetPausedAt()), CreatedBy: s.GetCreatedBy(), CreatedAt: tsTime(s.GetCreatedAt()),
		UpdatedBy: s.GetUpdatedBy(), UpdatedAt: tsTime(s.GetUpdatedAt()), Version: s.GetVersion(), NextTicks: []time.Time{},
		LastTick: tsTime(s.GetLastTick()), LastRun: s.GetLastRun(), LastRunTick: tsTime(s.GetLastRunTick()), WaitingTick: tsTime(s.GetWaitingTick()),
		Started: s.GetStarted(), Skipped: s.GetSkipped(), Missed: s.GetMissed(), LastSkip: s.GetLastSkip(), LastError: s.GetLastError()}
	if sp.GetGrace() != nil {
		out.Spec.Grace = sp.GetGrace().AsDuration().String()
	}
	for _, t := range s.GetNextTicks() {
		out.NextTicks = append(out.NextTicks, t.AsTime())
	}
	return out
}

func listSchedules(g *globals, cmd *cobra.Command, skill string) error {
	if skill != "" {
		if err := skillName(skill); err != nil {
			return err
		}
	}
	return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.ListSchedulesResponse, error) {
		return c.schedules.ListSchedules(ctx, &tollgatev1.ListSchedulesRequest{Skill: skill})
	}, func(resp *tollgatev1.ListSchedulesResponse) any {
		out := struct {
			Schedules []scheduleJSON `json:"schedules"`
		}{Schedules: []scheduleJSON{}}
		for _, s := range resp.GetSchedules() {
			out.Schedules = append(out.Schedules, scheduleOf(s))
		}
		return out
	}, func(w io.Writer, resp *tollgatev1.ListSchedulesResponse) error {
		if len(resp.GetSchedules()) == 0 {
			fmt.Fprintln(w, "no schedules; approvectl schedules add NAME --skill SKILL --cron EXPR adds one")
			return nil
		}
		now := g.cfg.Now()
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSKILL\tCRON\tNEXT\tSTARTED\tSKIPPED\tMISSED\tLAST RUN")
		for _, s := range resp.GetSchedules() {
			sp := s.GetSpec()
			next := "-"
			switch {
			case s.GetPaused():
				next = "paused"
			case len(s.GetNextTicks()) > 0:
				next = stamp(s.GetNextTicks()[0], now)
			}
			last := "-"
			if s.GetLastRun() != "" {
				last = cell(s.GetLastRun()) + " (tick " + tickTime(s.GetLastRunTick()) + ")"
			}
			if s.GetLastError() != "" {
				last += "  ERROR"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", cell(sp.GetName()), cell(skillOfSpec(sp)), cell(sp.GetCron()+" "+zoneOf(sp)), next,
				s.GetStarted(), s.GetSkipped(), s.GetMissed(), last)
		}
		return tw.Flush()
	})
}

// skillOfSpec is the skill a schedule runs: NAME, or NAME@V pinned.
func skillOfSpec(sp *tollgatev1.ScheduleSpec) string {
	if v := sp.GetSkillVersion(); v != 0 {
		return fmt.Sprintf("%s@%d", sp.GetSkill(), v)
	}
	return sp.GetSkill()
}

func zoneOf(sp *tollgatev1.ScheduleSpec) string {
	if z := sp.GetTimeZone(); z != "" {
		return z
	}
	return "UTC"
}

// tickTime is a tick in local time, to the minute ("-" unset).
func tickTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().Local().Format("2006-01-02 15:04")
}

func newSchedulesShowCmd(g *globals) *cobra.Command {
	var next int32
	cmd := &cobra.Command{
		Use:   "show NAME [--next N]",
		Short: "Show a schedule: what it runs when, and what became of its ticks",
		Long: `Show a schedule: the skill it runs and with what inputs, its cron expression
and time zone, as whom its runs start, what it does with missed ticks and
with a tick while its previous run is live, who created, changed and paused
it, its next ticks (--next N, 5 by default, at most 50; local time), its
latest tick, the run its latest started tick made, a tick waiting for that
run to end, how many ticks started, were skipped or missed, and why the
latest skipped or missed tick started nothing and why the latest start
failed.

-o json prints all of it; its spec has the fields of schedules add -f FILE:
  approvectl schedules show nightly -o json | jq .spec > nightly.yaml
  (edit nightly.yaml)
  approvectl schedules add -f nightly.yaml --replace`,
		Example: `  approvectl schedules show nightly
  approvectl schedules show nightly --next 10 -o json | jq -r '.next_ticks[]'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := scheduleName(args[0]); err != nil {
				return err
			}
			if next < 1 || next > 50 {
				return usageErr("--next %d: want 1 to 50 ticks", next)
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.GetScheduleResponse, error) {
				return c.schedules.GetSchedule(ctx, &tollgatev1.GetScheduleRequest{Name: args[0], Next: next})
			}, func(resp *tollgatev1.GetScheduleResponse) any {
				return scheduleOf(resp.GetSchedule())
			}, func(w io.Writer, resp *tollgatev1.GetScheduleResponse) error {
				writeSchedule(w, resp.GetSchedule(), g.cfg.Now())
				return nil
			})
		},
	}
	cmd.Flags().Int32Var(&next, "next", 5, "how many next ticks to list (at most 50)")
	return cmd
}

// writeSchedule prints a schedule for people.
func writeSchedule(w io.Writer, s *tollgatev1.Schedule, now time.Time) {
	w = escaped{w} // inputs, reasons and errors are others' words
	sp := s.GetSpec()
	state := "active"
	if s.GetPaused() {
		state = fmt.Sprintf("paused by %s, %s", s.GetPausedBy(), stamp(s.GetPausedAt(), now))
	}
	fmt.Fprintf(w, "schedule %s  %s\n", sp.GetName(), state)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t%s\n", label, strings.ReplaceAll(fmt.Sprintf(format, args...), "\t", " "))
	}
	if sp.GetSkillVersion() != 0 {
		line("skill", "%s (version %d, pinned)", sp.GetSkill(), sp.GetSkillVersion())
	} else {
		line("skill", "%s (its latest version at each tick)", sp.GetSkill())
	}
	line("cron", "%s in %s", sp.GetCron(), zoneOf(sp))
	if len(sp.GetInputs()) == 0 {
		line("inputs", "none")
	}
	for i, k := range slices.Sorted(maps.Keys(sp.GetInputs())) {
		label := ""
		if i == 0 {
			label = "inputs"
		}
		line(label, "%s=%s", k, oneLine(sp.GetInputs()[k]))
	}
	runAs := sp.GetRunAs()
	if runAs == "" {
		runAs = s.GetCreatedBy() + " (its creator)"
	}
	line("runs as", "%s", runAs)
	line("catch-up", "%s", catchUpText(sp.GetCatchUp()))
	line("concurrency", "%s", concurrencyText(sp.GetConcurrency()))
	grace := "1m0s (the default)"
	if sp.GetGrace() != nil {
		grace = sp.GetGrace().AsDuration().String()
	}
	line("grace", "%s: a tick that starts later is missed", grace)
	line("created", "by %s, %s", s.GetCreatedBy(), stamp(s.GetCreatedAt(), now))
	if s.GetUpdatedBy() != "" || s.GetUpdatedAt() != nil {
		line("changed", "by %s, %s; version %d", s.GetUpdatedBy(), stamp(s.GetUpdatedAt(), now), s.GetVersion())
	}
	switch ticks := s.GetNextTicks(); {
	case s.GetPaused():
		line("next ticks", "none while paused (approvectl schedules resume %s)", sp.GetName())
	case len(ticks) == 0:
		line("next ticks", "none")
	default:
		// In the schedule's own zone too: the expression is read there.
		zone, _ := time.LoadLocation(sp.GetTimeZone())
		for i, t := range ticks {
			label := ""
			if i == 0 {
				label = "next ticks"
			}
			if zone != nil && sp.GetTimeZone() != "" && sp.GetTimeZone() != "UTC" {
				line(label, "%s  = %s %s", stamp(t, now), t.AsTime().In(zone).Format("Mon 15:04:05"), sp.GetTimeZone())
				continue
			}
			line(label, "%s", stamp(t, now))
		}
	}
	// Creating or resuming a schedule moves it too: no tick before then
	// is ever decided.
	if s.GetLastTick() != nil {
		line("decided to", "%s (ticks up to then are started, skipped, missed or passed over)", stamp(s.GetLastTick(), now))
	} else {
		line("decided to", "-")
	}
	if r := s.GetLastRun(); r != "" {
		line("last run", "%s for the tick %s (approvectl runs show %s)", r, tickTime(s.GetLastRunTick()), r)
	} else {
		line("last run", "none yet")
	}
	if t := s.GetWaitingTick(); t != nil {
		line("waiting", "the tick %s waits for %s to end", tickTime(t), s.GetLastRun())
	}
	line("ticks", "%d started, %d skipped, %d missed", s.GetStarted(), s.GetSkipped(), s.GetMissed())
	if r := s.GetLastSkip(); r != "" {
		line("last skip", "%s", oneLine(r))
	}
	if e := s.GetLastError(); e != "" {
		line("last error", "%s", oneLine(e))
	}
	_ = tw.Flush()
}

// oneLine is s on one line: a value that holds newlines is quoted.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\n\r") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

var (
	catchUps     = []string{"none", "last"}
	concurrences = []string{"allow", "skip", "wait"}
)

func catchUpText(v string) string {
	switch v {
	case "none":
		return "none: missed ticks start nothing"
	case "", "last":
		return "last: a run for the latest missed tick" + defaultNote(v)
	}
	return v
}

func concurrencyText(v string) string {
	switch v {
	case "allow":
		return "allow: a tick while the previous run is live starts another"
	case "", "skip":
		return "skip: a tick while the previous run is live starts nothing" + defaultNote(v)
	case "wait":
		return "wait: a tick while the previous run is live starts when it ends (one waits, later ones skip)"
	}
	return v
}

func defaultNote(v string) string {
	if v == "" {
		return " (the default)"
	}
	return ""
}

// scheduleName checks a schedule name given as an argument.
func scheduleName(s string) error {
	if nameRule.MatchString(s) {
		return nil
	}
	return usageErr("%q is not a schedule name: a name is 1-64 of a-z, 0-9, '-' and '_', starting with a letter or digit", limits.Short(s))
}

func newSchedulesAddCmd(g *globals) *cobra.Command {
	var (
		spec    scheduleSpecJSON
		inputs  []string
		file    string
		replace bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME --skill SKILL[@VERSION] --cron EXPR [flags] | add -f FILE.yaml",
		Short: "Add a schedule that starts runs of a saved skill, or replace one",
		Long: `Add a schedule: it starts a run of a saved skill at each tick of a cron
expression. --skill NAME runs its latest version at each tick; NAME@V pins
version V. --cron takes 5 fields (minute hour day-of-month month
day-of-week), 6 with seconds first, or a descriptor (@daily, @hourly…), read
in --tz (an IANA zone such as Europe/Berlin; UTC by default).

Its runs start as --run-as (default: you; anyone else needs the operator
role) with the --input values. --catch-up says what becomes of ticks missed
while no control plane could start them: last (the default) starts one run
for the latest of them, none starts nothing. --concurrency says what a tick does while the
schedule's previous run is live: skip (the default) starts nothing, allow
starts another, wait starts it when the previous one ends. --grace is how
late a tick may start and still count (default 1m); later, it is missed.

-f FILE reads all of it from a YAML file instead, with the fields name,
skill, skill_version, cron, time_zone, inputs (a map), run_as, catch_up,
concurrency and grace (a duration such as 90s); any other field is refused.
schedules show NAME -o json prints its spec in that shape.

A schedule of that name is refused unless --replace: then its spec is
replaced whole (what is not given takes its default), checked against the
version read first. The schedule is printed as schedules show prints it.`,
		Example: `  approvectl schedules add nightly --skill greet --cron '0 9 * * 1-5' --tz Europe/Berlin --input who=bob
  approvectl schedules add nightly --skill greet@3 --cron @daily --concurrency wait --replace
  approvectl schedules add -f nightly.yaml --replace`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file != "" {
				for _, f := range []string{"skill", "cron", "tz", "input", "run-as", "catch-up", "concurrency", "grace"} {
					if cmd.Flags().Changed(f) {
						return usageErr("-f %s gives the whole schedule: leave out --%s (or -f)", file, f)
					}
				}
				fromFile, err := readScheduleFile(file)
				if err != nil {
					return err
				}
				if len(args) == 1 && fromFile.Name != "" && fromFile.Name != args[0] {
					return usageErr("%s names the schedule %q, not %q", file, limits.Short(fromFile.Name), limits.Short(args[0]))
				}
				if len(args) == 1 {
					fromFile.Name = args[0]
				}
				spec = fromFile
			} else {
				if len(args) == 0 {
					return usageErr("add needs a NAME for the schedule (or -f FILE)")
				}
				spec.Name = args[0]
				for _, kv := range inputs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return usageErr("--input %q: want NAME=VALUE", limits.Short(kv))
					}
					if spec.Inputs == nil {
						spec.Inputs = map[string]string{}
					}
					spec.Inputs[k] = v
				}
			}
			ps, err := protoSpec(spec, file)
			if err != nil {
				return err
			}
			return g.session(cmd, func(ctx context.Context, c *client) error {
				var expect int64
				if replace {
					resp, err := c.schedules.GetSchedule(ctx, &tollgatev1.GetScheduleRequest{Name: ps.GetName()})
					switch {
					case status.Code(err) == codes.NotFound:
					case err != nil:
						return rpcErr(err)
					default:
						expect = resp.GetSchedule().GetVersion()
					}
				}
				resp, err := c.schedules.PutSchedule(ctx, &tollgatev1.PutScheduleRequest{Spec: ps, ExpectedVersion: expect})
				if err != nil {
					if status.Code(err) == codes.FailedPrecondition && !replace {
						err = status.Errorf(codes.FailedPrecondition, "%s (--replace replaces it)", status.Convert(err).Message())
					}
					return rpcErr(err)
				}
				s := resp.GetSchedule()
				if g.json() {
					return g.printJSON(struct {
						scheduleJSON
						Created bool `json:"created"`
					}{scheduleOf(s), expect == 0})
				}
				if expect == 0 {
					fmt.Fprintf(g.cfg.Stdout, "created schedule %s\n", ps.GetName())
				} else {
					fmt.Fprintf(g.cfg.Stdout, "replaced schedule %s (it was version %d)\n", ps.GetName(), expect)
				}
				writeSchedule(g.cfg.Stdout, s, g.cfg.Now())
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Skill, "skill", "", "the saved skill it runs: NAME (its latest version at each tick) or NAME@VERSION")
	f.StringVar(&spec.Cron, "cron", "", "when: a cron expression (5 fields, 6 with seconds, or @daily…); quote it")
	f.StringVar(&spec.TimeZone, "tz", "", "the IANA time zone the cron expression is read in (default UTC)")
	f.StringArrayVar(&inputs, "input", nil, "NAME=VALUE: an input of every run it starts (repeatable)")
	f.StringVar(&spec.RunAs, "run-as", "", "who its runs start as (default: you; anyone else needs the operator role)")
	f.StringVar(&spec.CatchUp, "catch-up", "", "missed ticks: last (default: one run for the latest) or none")
	f.StringVar(&spec.Concurrency, "concurrency", "", "a tick while its previous run is live: skip (default), allow or wait")
	f.StringVar(&spec.Grace, "grace", "", "how late a tick may start and count, such as 90s (default 1m)")
	f.StringVarP(&file, "file", "f", "", "read the schedule from this YAML file")
	f.BoolVar(&replace, "replace", false, "replace the schedule of that name, if there is one")
	return cmd
}

// protoSpec checks a schedule as written and makes it the API's; what is
// wrong is bad usage (exit 2), said as a flag, or as a field of file.
func protoSpec(s scheduleSpecJSON, file string) (*tollgatev1.ScheduleSpec, error) {
	name := func(flag, field string) string {
		if file != "" {
			return file + ": " + field
		}
		return "--" + flag
	}
	if err := scheduleName(s.Name); err != nil {
		return nil, err
	}
	if s.Skill == "" {
		return nil, usageErr("%s: which saved skill does it run? (approvectl skills list)", name("skill", "skill"))
	}
	skill, version, err := skillRef(s.Skill)
	if err != nil {
		return nil, err
	}
	if version != 0 && s.SkillVersion != 0 && version != s.SkillVersion {
		return nil, usageErr("%s: skill %s and skill_version %d disagree", file, s.Skill, s.SkillVersion)
	}
	if s.SkillVersion < 0 {
		return nil, usageErr("%s: %d is not a version (0 is the latest at each tick)", name("skill", "skill_version"), s.SkillVersion)
	}
	if version == 0 {
		version = s.SkillVersion
	}
	if strings.TrimSpace(s.Cron) == "" {
		return nil, usageErr("%s: when should it run? a cron expression such as '0 9 * * 1-5', or @daily", name("cron", "cron"))
	}
	if s.CatchUp != "" && !slices.Contains(catchUps, s.CatchUp) {
		return nil, usageErr("%s %q: want none or last", name("catch-up", "catch_up"), limits.Short(s.CatchUp))
	}
	if s.Concurrency != "" && !slices.Contains(concurrences, s.Concurrency) {
		return nil, usageErr("%s %q: want allow, skip or wait", name("concurrency", "concurrency"), limits.Short(s.Concurrency))
	}
	for k := range s.Inputs {
		if k == "" {
			return nil, usageErr("%s: an input has no name", name("input", "inputs"))
		}
	}
	out := &tollgatev1.ScheduleSpec{Name: s.Name, Skill: skill, SkillVersion: version, Cron: s.Cron, TimeZone: s.TimeZone, Inputs: s.Inputs,
		RunAs: s.RunAs, CatchUp: s.CatchUp, Concurrency: s.Concurrency}
	if s.Grace != "" {
		d, err := time.ParseDuration(s.Grace)
		if err != nil || d < time.Second {
			return nil, usageErr("%s %q: want a duration of at least 1s, such as 90s or 5m", name("grace", "grace"), limits.Short(s.Grace))
		}
		out.Grace = durationpb.New(d)
	}
	return out, nil
}

// maxScheduleFile bounds a schedule file.
const maxScheduleFile = 1 << 20

// readScheduleFile reads a schedule from a YAML file, strictly: one
// document, a mapping of the known fields (scheduleFields), each of its
// type. What is wrong is bad usage, with the file and line.
func readScheduleFile(file string) (scheduleSpecJSON, error) {
	var spec scheduleSpecJSON
	f, err := os.Open(file)
	if err != nil {
		return spec, usageErr("read schedule: %v", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxScheduleFile+1))
	f.Close()
	if err != nil {
		return spec, usageErr("read schedule: %v", err)
	}
	if len(b) > maxScheduleFile {
		return spec, usageErr("%s: over the limit of %s for a schedule file", file, limits.Size(maxScheduleFile))
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return spec, usageErr("%s is empty: a schedule file has the fields %s", file, strings.Join(scheduleFields, ", "))
		}
		return spec, usageErr("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return spec, usageErr("%s holds more than one YAML document: a schedule file holds one schedule", file)
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind != yaml.MappingNode {
		return spec, usageErr("%s:%d: a schedule file is a mapping of the fields %s", file, top.Line, strings.Join(scheduleFields, ", "))
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if !slices.Contains(scheduleFields, k.Value) {
			return spec, usageErr("%s:%d: unknown field %q: a schedule file has the fields %s", file, k.Line, limits.Short(k.Value), strings.Join(scheduleFields, ", "))
		}
		if k.Value != "inputs" && v.Kind != yaml.ScalarNode {
			return spec, usageErr("%s:%d: %s: want one value", file, v.Line, k.Value)
		}
		if k.Value == "skill_version" && v.Tag != "!!int" {
			return spec, usageErr("%s:%d: skill_version: want a number (0, or leave it out: the latest version at each tick)", file, v.Line)
		}
		if k.Value == "inputs" && v.Kind != yaml.MappingNode && v.Tag != "!!null" {
			return spec, usageErr("%s:%d: inputs: want a mapping, one NAME: VALUE a line", file, v.Line)
		}
		for j := 1; k.Value == "inputs" && j < len(v.Content); j += 2 {
			if v.Content[j].Kind != yaml.ScalarNode {
				return spec, usageErr("%s:%d: inputs: %s: want one value", file, v.Content[j].Line, limits.Short(v.Content[j-1].Value))
			}
		}
	}
	if err := top.Decode(&spec); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return spec, usageErr("%s: %s", file, strings.Join(te.Errors, "; "))
		}
		return spec, usageErr("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return spec, nil
}

// scheduleStateCmd is pause or resume: one call on a schedule by name,
// printed with text, or as the schedule under -o json.
func scheduleStateCmd(g *globals, verb, short, long string, rpc func(ctx context.Context, c *client, name string) (*tollgatev1.Schedule, error),
	text func(w io.Writer, s *tollgatev1.Schedule, now time.Time)) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " NAME",
		Short:   short,
		Long:    long + "\n\n-o json prints the schedule as schedules show -o json does.",
		Example: "  approvectl schedules " + verb + " nightly",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := scheduleName(args[0]); err != nil {
				return err
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.Schedule, error) {
				return rpc(ctx, c, args[0])
			}, func(s *tollgatev1.Schedule) any {
				return scheduleOf(s)
			}, func(w io.Writer, s *tollgatev1.Schedule) error {
				text(escaped{w}, s, g.cfg.Now())
				return nil
			})
		},
	}
}

func newSchedulesRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a schedule; the runs it started are untouched",
		Long: `Remove a schedule: it starts no more runs. The runs it started are untouched
(approvectl runs --schedule NAME still lists them).`,
		Example: "  approvectl schedules rm nightly",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := scheduleName(args[0]); err != nil {
				return err
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.DeleteScheduleResponse, error) {
				return c.schedules.DeleteSchedule(ctx, &tollgatev1.DeleteScheduleRequest{Name: args[0]})
			}, func(*tollgatev1.DeleteScheduleResponse) any {
				return struct {
					Name    string `json:"name"`
					Deleted bool   `json:"deleted"`
				}{args[0], true}
			}, func(w io.Writer, _ *tollgatev1.DeleteScheduleResponse) error {
				fmt.Fprintf(w, "deleted schedule %s; the runs it started are untouched (approvectl runs --schedule %s)\n", args[0], args[0])
				return nil
			})
		},
	}
}
