package approvectl

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// maxPages bounds how many pages a listing reads (ListSkills,
// SkillHistory): at the server's largest page, half a million entries.
const maxPages = 1000

func newSkillsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "Save skills on the control plane and read their history",
		Long: `The skills the control plane keeps: saved SKILL.md files that run by name
(approvectl run NAME) and that schedules start. Every version a skill ever
had is kept, with its source, the digest of the plan it compiled to, who
published it and when; removing a skill records the removal and keeps its
history.

Without a verb, skills lists them (skills list). Publishing, changing and
removing a skill needs a role for the policy action skill.NAME; anyone
signed in may read skills.`,
		Example: `  approvectl skills push ./skills
  approvectl skills show greet
  approvectl skills diff greet 2 3
  approvectl skills history greet -o json | jq -r '.versions[] | "\(.version) \(.author)"'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listSkills(g, cmd) },
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the saved skills, by name, each as its latest version",
		Long: `List the saved skills, by name, each as its latest version: its version
number, description, who published it and when (local time, and how long
ago), and how it came (api: pushed through the API, with approvectl skills
push; dir: loaded by the control plane from its --skills-dir). Removed skills
are not listed (approvectl skills history NAME still shows them). Every
page is read. -o json prints the same, published_at in RFC 3339.`,
		Example: `  approvectl skills list
  approvectl skills list -o json | jq -r '.skills[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listSkills(g, cmd) },
	}
	cmd.AddCommand(newSkillsPushCmd(g), list, newSkillsShowCmd(g), newSkillsHistoryCmd(g), newSkillsDiffCmd(g), newSkillsRmCmd(g))
	return cmd
}

// skillJSON is one version of a skill for scripts.
type skillJSON struct {
	Name        string    `json:"name"`
	Version     int64     `json:"version"`
	Description string    `json:"description"`
	Source      string    `json:"source,omitempty"`
	PlanDigest  string    `json:"plan_digest"`
	Author      string    `json:"author"`
	PublishedAt time.Time `json:"published_at,omitzero"`
	Deleted     bool      `json:"deleted"`
	Origin      string    `json:"origin"`
}

func skillOf(s *tollgatev1.Skill) *skillJSON {
	if s == nil {
		return nil
	}
	return &skillJSON{Name: s.GetName(), Version: s.GetVersion(), Description: s.GetDescription(), Source: s.GetSource(),
		PlanDigest: s.GetPlanDigest(), Author: s.GetAuthor(), PublishedAt: tsTime(s.GetPublishedAt()), Deleted: s.GetDeleted(), Origin: s.GetOrigin()}
}

func listSkills(g *globals, cmd *cobra.Command) error {
	return call(g, cmd, func(ctx context.Context, c *client) ([]*tollgatev1.Skill, error) {
		var all []*tollgatev1.Skill
		err := pages(func(token string) (string, error) {
			resp, err := c.skills.ListSkills(ctx, &tollgatev1.ListSkillsRequest{PageSize: 500, PageToken: token})
			all = append(all, resp.GetSkills()...)
			return resp.GetNextPageToken(), err
		})
		return all, err
	}, func(skills []*tollgatev1.Skill) any {
		out := struct {
			Skills []*skillJSON `json:"skills"`
		}{Skills: []*skillJSON{}}
		for _, s := range skills {
			out.Skills = append(out.Skills, skillOf(s))
		}
		return out
	}, func(w io.Writer, skills []*tollgatev1.Skill) error {
		if len(skills) == 0 {
			fmt.Fprintln(w, "no skills saved yet; approvectl skills push PATH saves one")
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tVERSION\tDESCRIPTION\tAUTHOR\tPUBLISHED\tORIGIN")
		now := g.cfg.Now()
		for _, s := range skills {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", cell(s.GetName()), s.GetVersion(), fit(cell(s.GetDescription()), 60), cell(s.GetAuthor()),
				stamp(s.GetPublishedAt(), now), cell(s.GetOrigin()))
		}
		return tw.Flush()
	})
}

// pages calls next with each page token, starting with "", until it
// returns an empty one, an error, the token it was given (a server that
// would loop), or maxPages pages were read.
func pages(next func(token string) (string, error)) error {
	token := ""
	for range maxPages {
		t, err := next(token)
		if err != nil || t == "" || t == token {
			return err
		}
		token = t
	}
	return nil
}

func newSkillsShowCmd(g *globals) *cobra.Command {
	var source bool
	cmd := &cobra.Command{
		Use:   "show NAME[@VERSION] [--source]",
		Short: "Show a skill: who published it, when, and its plan card",
		Long: `Show a version of a skill (the latest, or NAME@VERSION): its description,
who published it and when, how it came (api or dir), the digest of the plan
it compiled to when it was published, which versions exist, then the plan
card of what it compiles to now against the control plane's tool catalog,
with the commands that run it once or schedule it. A skill that no longer
compiles (a tool left the catalog) says why instead.

--source prints its SKILL.md instead of the card. -o json prints all of it:
skill (with source), latest_version, plan_digest and plan_card as compiled
now, diagnostics, run_once and schedule.`,
		Example: `  approvectl skills show greet
  approvectl skills show greet@2 --source
  approvectl skills show greet -o json | jq -r .skill.plan_digest`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, err := skillRef(args[0])
			if err != nil {
				return err
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.GetSkillResponse, error) {
				return c.skills.GetSkill(ctx, &tollgatev1.GetSkillRequest{Name: name, Version: version})
			}, func(resp *tollgatev1.GetSkillResponse) any {
				s := resp.GetSkill()
				out := struct {
					Skill       *skillJSON `json:"skill"`
					Latest      int64      `json:"latest_version"`
					PlanDigest  string     `json:"plan_digest"` // of the plan it compiles to now
					PlanCard    string     `json:"plan_card"`
					Diagnostics []diagJSON `json:"diagnostics"`
					RunOnce     string     `json:"run_once,omitempty"`
					Schedule    string     `json:"schedule,omitempty"`
				}{Skill: skillOf(s), Latest: resp.GetLatestVersion(), PlanDigest: resp.GetPlan().GetDigest(), PlanCard: resp.GetPlanCard(),
					Diagnostics: diagsJSON(resp.GetDiagnostics())}
				if resp.GetPlan() != nil && !s.GetDeleted() {
					ref := savedRef(s, resp.GetLatestVersion())
					out.RunOnce, out.Schedule = runOnceSaved(ref), scheduleSaved(s.GetName(), ref)
				}
				return out
			}, func(w io.Writer, resp *tollgatev1.GetSkillResponse) error {
				writeSkill(escaped{w}, resp, source, g.cfg.Now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&source, "source", false, "print the SKILL.md instead of the plan card")
	return cmd
}

// writeSkill prints a version of a skill for people.
func writeSkill(w io.Writer, resp *tollgatev1.GetSkillResponse, source bool, now time.Time) {
	s, latest := resp.GetSkill(), resp.GetLatestVersion()
	which := "(latest)"
	if s.GetVersion() != latest {
		which = fmt.Sprintf("(latest v%d)", latest)
	}
	if s.GetDeleted() {
		fmt.Fprintf(w, "skill %s v%d %s: this version records its removal by %s, %s\n", s.GetName(), s.GetVersion(), which,
			s.GetAuthor(), stamp(s.GetPublishedAt(), now))
		fmt.Fprintf(w, "  versions: 1..%d (latest %d); approvectl skills history %s lists them\n", latest, latest, s.GetName())
		return
	}
	fmt.Fprintf(w, "skill %s v%d %s\n", s.GetName(), s.GetVersion(), which)
	if d := s.GetDescription(); d != "" {
		fmt.Fprintf(w, "  %s\n", d)
	}
	fmt.Fprintf(w, "  author     %s\n", s.GetAuthor())
	fmt.Fprintf(w, "  published  %s\n", stamp(s.GetPublishedAt(), now))
	fmt.Fprintf(w, "  origin     %s\n", originWord(s.GetOrigin()))
	fmt.Fprintf(w, "  plan       %s (when published)\n", s.GetPlanDigest())
	if d := resp.GetPlan().GetDigest(); d != "" && d != s.GetPlanDigest() {
		fmt.Fprintf(w, "  plan now   %s (the tool catalog changed since)\n", d)
	}
	fmt.Fprintf(w, "  versions: 1..%d (latest %d)\n", latest, latest)
	fmt.Fprintln(w)
	ref := fmt.Sprintf("%s@%d", s.GetName(), s.GetVersion())
	if resp.GetPlan() == nil {
		fmt.Fprintf(w, "%s does not compile against the control plane's tool catalog now:\n", ref)
		writeDiagnostics(w, ref, resp.GetDiagnostics())
	}
	if source {
		fmt.Fprint(w, s.GetSource())
		if src := s.GetSource(); src != "" && !strings.HasSuffix(src, "\n") {
			fmt.Fprintln(w)
		}
		return
	}
	if resp.GetPlan() == nil {
		return
	}
	fmt.Fprint(w, resp.GetPlanCard())
	ref = savedRef(s, latest)
	writeButtons(w, [2]string{"Run once", runOnceSaved(ref)}, [2]string{"Schedule", scheduleSaved(s.GetName(), ref)})
}

func originWord(o string) string {
	switch o {
	case "api":
		return "api (pushed through the API)"
	case "dir":
		return "dir (loaded from the control plane's --skills-dir)"
	}
	return o
}

// savedRef names a saved version for run and schedules add: NAME for
// the latest (a schedule of it then follows later versions), NAME@V for
// an older one.
func savedRef(s *tollgatev1.Skill, latest int64) string {
	if s.GetVersion() == latest {
		return s.GetName()
	}
	return fmt.Sprintf("%s@%d", s.GetName(), s.GetVersion())
}

func runOnceSaved(ref string) string { return "approvectl run " + shellQuote(ref) }

func scheduleSaved(name, ref string) string {
	return "approvectl schedules add " + shellQuote(name) + " --skill " + shellQuote(ref) + " --cron '" + cronPlaceholder + "'"
}

// cronPlaceholder stands for the cron expression in the commands the
// plan card's buttons print: the person chooses when.
const cronPlaceholder = "EXPR"

// writeButtons ends a plan card shown before anything runs with what each
// of its two buttons means here: the command that does it.
func writeButtons(w io.Writer, buttons ...[2]string) {
	width := 0
	for _, b := range buttons {
		width = max(width, len([]rune(b[0]))+2)
	}
	fmt.Fprintln(w)
	for _, b := range buttons {
		fmt.Fprintf(w, "%-*s  %s\n", width, "["+b[0]+"]", b[1])
	}
}

func newSkillsHistoryCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "history NAME",
		Short: "List every version of a skill, removals included",
		Long: `List every version a skill ever had, oldest first: who published it and when,
the digest of the plan it compiled to (short; -o json has it whole), and how
it came (api or dir), or "deleted" for a version that records the skill's
removal. A removed skill keeps its history. approvectl skills show NAME@V
shows a version; approvectl skills diff NAME V1 V2 compares two.`,
		Example: `  approvectl skills history greet
  approvectl skills history greet -o json | jq -r '.versions[-1].plan_digest'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := skillName(args[0]); err != nil {
				return err
			}
			return call(g, cmd, func(ctx context.Context, c *client) ([]*tollgatev1.Skill, error) {
				var all []*tollgatev1.Skill
				err := pages(func(token string) (string, error) {
					resp, err := c.skills.SkillHistory(ctx, &tollgatev1.SkillHistoryRequest{Name: args[0], PageSize: 500, PageToken: token})
					all = append(all, resp.GetVersions()...)
					return resp.GetNextPageToken(), err
				})
				return all, err
			}, func(versions []*tollgatev1.Skill) any {
				out := struct {
					Name     string       `json:"name"`
					Versions []*skillJSON `json:"versions"`
				}{Name: args[0], Versions: []*skillJSON{}}
				for _, s := range versions {
					out.Versions = append(out.Versions, skillOf(s))
				}
				return out
			}, func(w io.Writer, versions []*tollgatev1.Skill) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VERSION\tAUTHOR\tPUBLISHED\tPLAN DIGEST\tORIGIN")
				now := g.cfg.Now()
				for _, s := range versions {
					origin, digest := cell(s.GetOrigin()), shortDigest(s.GetPlanDigest())
					if s.GetDeleted() {
						origin, digest = "deleted", "-"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", s.GetVersion(), cell(s.GetAuthor()), stamp(s.GetPublishedAt(), now), digest, origin)
				}
				return tw.Flush()
			})
		},
	}
}

func newSkillsRmCmd(g *globals) *cobra.Command {
	var expect int64
	cmd := &cobra.Command{
		Use:   "rm NAME [--expect-version N]",
		Short: "Remove a skill; its history is kept",
		Long: `Remove a skill: it is no longer listed nor runnable by name, and schedules
of it fail their ticks until it is published again. Nothing is erased: its
history gains a version that records who removed it, and every earlier
version can still be shown (approvectl skills show NAME@V).

--expect-version N removes it only if its latest version is N (refused
otherwise): what you looked at is what you remove.`,
		Example: `  approvectl skills rm greet
  approvectl skills rm greet --expect-version 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := skillName(args[0]); err != nil {
				return err
			}
			if expect < 0 {
				return usageErr("--expect-version %d: want the version you expect to be the latest (1, 2, …)", expect)
			}
			return call(g, cmd, func(ctx context.Context, c *client) (*tollgatev1.DeleteSkillResponse, error) {
				return c.skills.DeleteSkill(ctx, &tollgatev1.DeleteSkillRequest{Name: args[0], ExpectedVersion: expect})
			}, func(resp *tollgatev1.DeleteSkillResponse) any {
				return struct {
					Name      string     `json:"name"`
					Deleted   bool       `json:"deleted"`
					Tombstone *skillJSON `json:"tombstone"`
				}{args[0], true, skillOf(resp.GetTombstone())}
			}, func(w io.Writer, resp *tollgatev1.DeleteSkillResponse) error {
				w = escaped{w}
				fmt.Fprintf(w, "deleted %s (history kept: %s)\n", args[0], plural(int(resp.GetTombstone().GetVersion()), "version"))
				fmt.Fprintf(w, "  its schedules fail their ticks until it is published again: approvectl schedules list --skill %s\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&expect, "expect-version", 0, "remove it only if its latest version is this one")
	return cmd
}

// nameRule is the rule of skill and schedule names.
var nameRule = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// skillName checks a skill name given as an argument: a path or a name
// the control plane could not hold is bad usage (exit 2).
func skillName(s string) error {
	if nameRule.MatchString(s) {
		return nil
	}
	if strings.ContainsAny(s, `/\.`) {
		return usageErr("%q is not a skill name (approvectl skills push %s saves a file or folder)", limits.Short(s), shellQuote(s))
	}
	return usageErr("%q is not a skill name: a name is 1-64 of a-z, 0-9, '-' and '_', starting with a letter or digit", limits.Short(s))
}

// skillRef reads NAME or NAME@VERSION; version 0 is the latest.
func skillRef(s string) (string, int64, error) {
	name, v, hasV := strings.Cut(s, "@")
	if err := skillName(name); err != nil {
		return "", 0, err
	}
	if !hasV {
		return name, 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return "", 0, usageErr("%q: the version after @ is a number from 1 (approvectl skills history %s lists them)", limits.Short(s), name)
	}
	return name, n, nil
}

// stamp is a time for people: absolute in the local zone, then how long
// ago it was or how soon it comes: "2026-03-01 07:30 (1h ago)". Unset
// reads "-".
func stamp(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "-"
	}
	t := ts.AsTime()
	if t.After(now) {
		return deadlineText(t.Local(), now)
	}
	return t.Local().Format("2006-01-02 15:04") + " (" + ago(now.Sub(t)) + " ago)"
}

// cell is others' words made fit for one table cell: escaped, on one
// line, without the tabs that would shift the columns.
func cell(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(escapeControls(s))
}

// shortDigest is the start of a digest, enough to tell plans apart in a
// table: "sha256:ab4945c57d61".
func shortDigest(d string) string {
	if d == "" {
		return "-"
	}
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return cell(d)
	}
	return cell(algo + ":" + hex[:12])
}

// shellSafe are the characters a shell word may hold unquoted.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote makes s one shell word, quoting it only when it must be.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// diagJSON is a diagnostic for scripts: the shape `plan -o json` prints
// (compiler.Diagnostic), with what the control plane adds.
type diagJSON struct {
	compiler.Diagnostic
	SubjectID string `json:"subject_id,omitempty"`
	Hint      string `json:"hint,omitempty"`
}

func diagsJSON(ds []*tollgatev1.Diagnostic) []diagJSON {
	out := []diagJSON{}
	for _, d := range ds {
		out = append(out, diagJSON{Diagnostic: diagOf(d), SubjectID: d.GetSubjectId(), Hint: d.GetHint()})
	}
	return out
}

// diagOf is a diagnostic of the API as the compiler writes it.
func diagOf(d *tollgatev1.Diagnostic) compiler.Diagnostic {
	sev := compiler.Severity(enumWord(d.GetSeverity().String(), "DIAGNOSTIC_SEVERITY_"))
	switch d.GetSeverity() {
	case tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR:
		sev = compiler.Error
	case tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_WARNING:
		sev = compiler.Warning
	}
	return compiler.Diagnostic{Pos: compiler.Pos{Line: int(d.GetLine()), Col: int(d.GetColumn())}, Severity: sev, Code: d.GetCode(), Message: d.GetMessage()}
}

// writeDiagnostics prints ds as `approvectl plan` does,
// FILE:LINE:COL: error: message [code], each with its hint under it.
func writeDiagnostics(w io.Writer, file string, ds []*tollgatev1.Diagnostic) {
	for _, d := range ds {
		fmt.Fprint(w, compiler.FormatDiagnostics(file, compiler.Diagnostics{diagOf(d)}))
		if h := d.GetHint(); h != "" {
			fmt.Fprintf(w, "  hint: %s\n", h)
		}
	}
}

func errorCount(ds []*tollgatev1.Diagnostic) int {
	n := 0
	for _, d := range ds {
		if d.GetSeverity() == tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR {
			n++
		}
	}
	return n
}
