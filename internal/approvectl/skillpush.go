package approvectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// What skills push reads of a folder: at most maxPushFiles SKILL.md
// files, found among at most maxWalkEntries files and folders, each at
// most the compiler's source limit.
const (
	maxPushFiles   = 1000
	maxWalkEntries = 100_000
)

func newSkillsPushCmd(g *globals) *cobra.Command {
	var expect int64
	cmd := &cobra.Command{
		Use:   "push PATH|DIR [--expect-version N]",
		Short: "Save skills on the control plane: a SKILL.md, a recipe, a skill folder, or every skill under a folder",
		Long: `Save skills on the control plane, each as its next version. PATH is a SKILL.md,
a recipe file, or a skill's folder (holding SKILL.md); a folder that holds no
SKILL.md itself is searched, folders inside it too (hidden ones and symbolic
links aside), and every SKILL.md found is pushed, in order of their paths: at
most 1000 of them, each at most 1 MiB (a bigger folder is refused whole, a
bigger file is not pushed). A skill is named by its front matter's name, else
by its folder (a recipe file: by its file name).

The control plane compiles each against its tool catalog and stores it only
if it compiles and policy has someone who could decide each of its gates.
For each, one line:

  pushed greet v3  plan sha256:…      stored as version 3
  unchanged greet v3                  version 3 holds this source already
  not pushed greet  FILE: 2 errors    and the errors on stderr, as
                                      FILE:LINE:COL: error: message [code]

A skill that is not pushed does not stop the others. Pushing one file also
prints its plan card, with the commands that run it once or schedule it.

--expect-version N pushes only if the latest version is N (-1: only if the
skill does not exist yet), for one skill.

-o json prints an array, one object per file: file, saved, unchanged,
skill, plan_digest, diagnostics (as plan -o json prints them, with hint),
plan_card and error (why it was not read or the server refused it).

Exit codes: 0 every skill pushed or unchanged; 1 some did not compile or
were refused (the others were pushed); 2 bad usage, or a file that could not
be read (too big, unreadable); 3 the control plane could not be reached.`,
		Example: `  approvectl skills push examples/skills/graph-ask-demo
  approvectl skills push ./skills
  approvectl skills push greet/SKILL.md --expect-version 2
  approvectl skills push ./skills -o json | jq -r '.[] | select(.saved | not) | .file'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			targets, err := pushTargets(args[0], maxPushFiles, maxWalkEntries)
			if err != nil {
				return err
			}
			if expect < -1 {
				return usageErr("--expect-version %d: want the latest version you expect (1, 2, …), or -1 for a skill that does not exist yet", expect)
			}
			if expect != 0 && len(targets) > 1 {
				return usageErr("--expect-version names the version of one skill; %s holds %d", args[0], len(targets))
			}
			if len(targets) == 1 {
				// one file: one that cannot be read is bad usage, before any call
				if targets[0].err == nil {
					targets[0] = readPushFile(targets[0].file)
				}
				if targets[0].err != nil {
					return &exitError{code: ExitUsage, err: targets[0].err}
				}
			}
			return g.session(cmd, func(ctx context.Context, c *client) error {
				return g.push(ctx, c, targets, expect)
			})
		},
	}
	cmd.Flags().Int64Var(&expect, "expect-version", 0, "push only if the skill's latest version is N (-1: only if it does not exist)")
	return cmd
}

// pushFile is one file skills push sends, or why it cannot.
type pushFile struct {
	file   string // the path, as found
	err    error  // it could not be found or read
	loaded bool   // read (readPushFile): name, shown and source are set
	name   string // the name to send: "" when its front matter names it
	shown  string // the name to print
	source string
}

// pushResult is what became of one file, for scripts.
type pushResult struct {
	File        string     `json:"file"`
	Saved       bool       `json:"saved"`
	Unchanged   bool       `json:"unchanged"`
	Skill       *skillJSON `json:"skill"`
	PlanDigest  string     `json:"plan_digest"`
	Diagnostics []diagJSON `json:"diagnostics"`
	PlanCard    string     `json:"plan_card,omitempty"`
	RunOnce     string     `json:"run_once,omitempty"`
	Schedule    string     `json:"schedule,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// push sends every target, one at a time, each read just before it is
// sent, and reports each as it goes. A target that is not pushed does not
// stop the others; a call that does not get through stops them all.
func (g *globals) push(ctx context.Context, c *client, targets []pushFile, expect int64) error {
	out, errw := escaped{g.cfg.Stdout}, escaped{g.cfg.Stderr}
	single := len(targets) == 1
	results := []pushResult{}
	worst, failed := ExitOK, 0
	fail := func(code int) {
		failed++
		worst = max(worst, code)
	}
	for i, t := range targets {
		r := pushResult{File: t.file, Diagnostics: []diagJSON{}}
		if t.err == nil && !t.loaded {
			t = readPushFile(t.file)
		}
		if t.err != nil {
			r.Error = t.err.Error()
			results = append(results, r)
			fail(ExitUsage)
			if !g.json() {
				fmt.Fprintf(out, "not pushed  %s\n", t.err)
			}
			continue
		}
		resp, err := c.skills.PutSkill(ctx, &tollgatev1.PutSkillRequest{Name: t.name, Source: t.source, ExpectedVersion: expect})
		if err != nil {
			err = rpcErr(err)
			if ee := (*exitError)(nil); errors.As(err, &ee) && ee.code == ExitInternal {
				if i > 0 {
					// the call did not get through: none after it would
					ee.err = fmt.Errorf("%w\n  pushing stopped at %s: it and %d more were not pushed", ee.err, t.file, len(targets)-i-1)
				}
				return ee
			}
			r.Error = err.Error()
			results = append(results, r)
			fail(ExitRefused)
			if !g.json() {
				fmt.Fprintf(out, "not pushed %s  %s: %s\n", t.shown, t.file, err)
			}
			continue
		}
		s := resp.GetSkill()
		r.Saved, r.Unchanged, r.Skill, r.PlanDigest = resp.GetSaved(), resp.GetUnchanged(), skillOf(s), resp.GetPlanDigest()
		r.Diagnostics, r.PlanCard = diagsJSON(resp.GetDiagnostics()), resp.GetPlanCard()
		if r.Saved {
			r.RunOnce, r.Schedule = runOnceSaved(s.GetName()), scheduleSaved(s.GetName(), s.GetName())
		}
		results = append(results, r)
		if !r.Saved {
			fail(ExitRefused)
		}
		if g.json() {
			continue
		}
		switch {
		case !r.Saved:
			why := plural(errorCount(resp.GetDiagnostics()), "error")
			if len(resp.GetDiagnostics()) == 0 {
				why = "the control plane gave no reason"
			}
			fmt.Fprintf(out, "not pushed %s  %s: %s\n", t.shown, t.file, why)
			writeDiagnostics(errw, t.file, resp.GetDiagnostics())
			continue
		case r.Unchanged:
			fmt.Fprintf(out, "unchanged %s v%d\n", s.GetName(), s.GetVersion())
		default:
			fmt.Fprintf(out, "pushed %s v%d  plan %s\n", s.GetName(), s.GetVersion(), resp.GetPlanDigest())
		}
		if !single {
			writeDiagnostics(errw, t.file, resp.GetDiagnostics()) // its warnings: the card that would show them is not printed
			continue
		}
		if card := resp.GetPlanCard(); card != "" {
			fmt.Fprintln(out)
			fmt.Fprint(out, card)
			writeButtons(out, [2]string{"Run once", r.RunOnce}, [2]string{"Schedule", r.Schedule})
		}
	}
	if g.json() {
		if err := g.printJSON(results); err != nil {
			return err
		}
	}
	if worst == ExitOK {
		return nil
	}
	err := fmt.Errorf("%d of %d skills not pushed", failed, len(targets))
	if single {
		err = fmt.Errorf("%s not pushed", targets[0].file)
	}
	return &exitError{code: worst, err: err, printed: g.json()}
}

// pushTargets is what skills push PATH sends: PATH itself when it is a
// file or a skill folder (holding SKILL.md), else every SKILL.md under
// it (walkSkills). An error is bad usage (exit 2), nothing pushed.
func pushTargets(path string, maxFiles, maxEntries int) ([]pushFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &exitError{code: ExitUsage, err: fmt.Errorf("read skill: %w", err)}
	}
	if !fi.IsDir() {
		return []pushFile{{file: path}}, nil
	}
	if _, err := os.Stat(filepath.Join(path, "SKILL.md")); err == nil {
		return []pushFile{{file: filepath.Join(path, "SKILL.md")}}, nil
	}
	files, err := walkSkills(path, maxFiles, maxEntries)
	if err != nil {
		return nil, &exitError{code: ExitUsage, err: err}
	}
	if len(files) == 0 {
		return nil, usageErr("%s holds no SKILL.md: push a SKILL.md, a recipe file, a skill folder, or a folder of skill folders", path)
	}
	return files, nil
}

var errWalkBound = errors.New("walk bound")

// walkSkills finds every file named SKILL.md under root, in the order of
// their paths, each folder's entries sorted by name. Hidden folders (.git)
// are not entered, nor are symbolic links to folders. A folder that cannot
// be read is reported as a file that could not be, and the walk goes on.
// More than maxFiles SKILL.md files, or more than maxEntries files and
// folders seen, refuse the whole walk: push a smaller folder.
func walkSkills(root string, maxFiles, maxEntries int) ([]pushFile, error) {
	var out []pushFile
	entries, bound := 0, ""
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			out = append(out, pushFile{file: p, err: fmt.Errorf("read %s: %w", p, unwrapPath(err))})
			return nil
		}
		if entries++; entries > maxEntries {
			bound = fmt.Sprintf("%s holds more than %d files and folders: point push at the folder of your skills", root, maxEntries)
			return errWalkBound
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() != "SKILL.md" {
			return nil
		}
		if len(out) == maxFiles {
			bound = fmt.Sprintf("%s holds more than %d SKILL.md files: push them a folder at a time", root, maxFiles)
			return errWalkBound
		}
		out = append(out, pushFile{file: p})
		return nil
	})
	switch {
	case errors.Is(err, errWalkBound):
		return nil, errors.New(bound)
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", root, unwrapPath(err))
	}
	return out, nil
}

// unwrapPath is err without the path a *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readPushFile reads a file skills push sends: at most the compiler's
// source limit, and names it (defaultName, unless its front matter names
// it).
func readPushFile(file string) pushFile {
	pf := pushFile{file: file}
	fi, err := os.Stat(file)
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err == nil && fi.Size() > compiler.MaxSourceBytes {
		err = fmt.Errorf("%s, over the limit of %s", limits.Size(int(fi.Size())), limits.Size(compiler.MaxSourceBytes))
	}
	var b []byte
	if err == nil {
		var f *os.File
		if f, err = os.Open(file); err == nil {
			b, err = io.ReadAll(io.LimitReader(f, compiler.MaxSourceBytes+1))
			f.Close()
			if err == nil && len(b) > compiler.MaxSourceBytes {
				err = fmt.Errorf("over the limit of %s", limits.Size(compiler.MaxSourceBytes))
			}
		}
	}
	if err != nil {
		pf.err = fmt.Errorf("%s: %w", file, unwrapPath(err))
		return pf
	}
	pf.source, pf.loaded = string(b), true
	pf.shown = frontMatterName(pf.source)
	if pf.shown == "" {
		pf.name = defaultName(file)
		pf.shown = pf.name
	}
	return pf
}

// defaultName names a recipe its front matter does not name: a SKILL.md
// by its folder, any other file by its name without extension.
func defaultName(file string) string {
	abs, _ := filepath.Abs(file)
	if strings.EqualFold(filepath.Base(file), "SKILL.md") {
		return filepath.Base(filepath.Dir(abs))
	}
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}

// frontMatterName is the name a SKILL.md's front matter gives, "" when it
// has none (or front matter the compiler will refuse, and say why).
func frontMatterName(src string) string {
	lines := strings.SplitAfter(src, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], "\r\n") != "---" {
		return ""
	}
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], "\r\n") != "---" {
			continue
		}
		var fm struct {
			Name string `yaml:"name"`
		}
		if yaml.Unmarshal([]byte(strings.Join(lines[1:i], "")), &fm) != nil {
			return ""
		}
		return fm.Name
	}
	return ""
}
