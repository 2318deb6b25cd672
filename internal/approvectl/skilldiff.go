package approvectl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

func newSkillsDiffCmd(g *globals) *cobra.Command {
	var source bool
	var width int
	cmd := &cobra.Command{
		Use:   "diff NAME V1 V2 [--source] [--width N]",
		Short: "Compare two versions of a skill: their plan cards side by side",
		Long: `Compare two versions of a skill: the plan cards each compiles to now, side by
side, NAME@V1 on the left and NAME@V2 on the right, as diff -y prints them:

  |  the line differs (the left one became the right one)
  <  a line only V1 has
  >  a line only V2 has

then "plan sha256:… → sha256:…", or "same plan" when both compile to the
same plan (then they differ in their words or layout only, if at all).
--source compares the SKILL.md files instead of the cards.

Each column is half of --width N, else of $COLUMNS on a terminal, else 80
characters wide; a longer line wraps, marked with …, and is cut after 10
rows (-o json has every line whole).

diff exits 0 whether the versions differ or not: read "same" in -o json,
which prints name, from and to (version, plan_digest and plan_card of the
plan compiled now, published_plan_digest, source with --source), same (the
same plan), and lines: [{op, left, right}] with op equal, change, delete or
insert.`,
		Example: `  approvectl skills diff greet 2 3
  approvectl skills diff greet 2 3 --source --width 200
  approvectl skills diff greet 2 3 -o json | jq .same`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := skillName(args[0]); err != nil {
				return err
			}
			var versions [2]int64
			for i, v := range args[1:] {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 1 {
					return usageErr("%q is not a version: versions are numbers from 1 (approvectl skills history %s lists them)", limits.Short(v), args[0])
				}
				versions[i] = n
			}
			colW := 80
			switch {
			case width != 0:
				if width < 23 {
					return usageErr("--width %d: want at least 23 (two columns of 10 and the marks between)", width)
				}
				colW = (width - 3) / 2
			case g.cfg.Terminal(g.cfg.Stdout):
				if cols, _ := strconv.Atoi(g.cfg.Getenv("COLUMNS")); cols >= 23 {
					colW = (cols - 3) / 2
				}
			}
			return call(g, cmd, func(ctx context.Context, c *client) ([2]*tollgatev1.GetSkillResponse, error) {
				var out [2]*tollgatev1.GetSkillResponse
				for i, v := range versions {
					resp, err := c.skills.GetSkill(ctx, &tollgatev1.GetSkillRequest{Name: args[0], Version: v})
					if err != nil {
						return out, err
					}
					out[i] = resp
				}
				return out, nil
			}, func(resp [2]*tollgatev1.GetSkillResponse) any {
				d := diffSkills(args[0], resp, source)
				type side struct {
					Version   int64      `json:"version"`
					Digest    string     `json:"plan_digest"`
					Published string     `json:"published_plan_digest"`
					Card      string     `json:"plan_card"`
					Source    string     `json:"source,omitempty"`
					Diags     []diagJSON `json:"diagnostics"`
					Deleted   bool       `json:"deleted,omitempty"`
				}
				sideOf := func(r *tollgatev1.GetSkillResponse) side {
					s := side{Version: r.GetSkill().GetVersion(), Digest: r.GetPlan().GetDigest(), Published: r.GetSkill().GetPlanDigest(),
						Card: r.GetPlanCard(), Diags: diagsJSON(r.GetDiagnostics()), Deleted: r.GetSkill().GetDeleted()}
					if source {
						s.Source = r.GetSkill().GetSource()
					}
					return s
				}
				return struct {
					Name  string     `json:"name"`
					From  side       `json:"from"`
					To    side       `json:"to"`
					Same  bool       `json:"same"`
					Lines []diffLine `json:"lines"`
				}{args[0], sideOf(resp[0]), sideOf(resp[1]), d.same, d.lines}
			}, func(w io.Writer, resp [2]*tollgatev1.GetSkillResponse) error {
				d := diffSkills(args[0], resp, source)
				w = escaped{w}
				writeSideBySide(w, d.heads, d.lines, colW)
				fmt.Fprintln(w)
				if d.same {
					fmt.Fprintf(w, "same plan (%s)\n", d.digests[0])
					return nil
				}
				fmt.Fprintf(w, "plan %s → %s\n", d.digests[0], d.digests[1])
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&source, "source", false, "compare the SKILL.md files instead of the plan cards")
	cmd.Flags().IntVar(&width, "width", 0, "the width of the two columns and the marks between (default $COLUMNS on a terminal, else 163: two columns of 80)")
	return cmd
}

// skillDiff is two versions of a skill compared.
type skillDiff struct {
	heads   [2]string // NAME@V
	digests [2]string // of the plans each compiles to now, or why none
	same    bool      // both compile to the same plan
	lines   []diffLine
}

func diffSkills(name string, resp [2]*tollgatev1.GetSkillResponse, source bool) skillDiff {
	var d skillDiff
	var text [2][]string
	for i, r := range resp {
		s := r.GetSkill()
		d.heads[i] = fmt.Sprintf("%s@%d", name, s.GetVersion())
		d.digests[i] = r.GetPlan().GetDigest()
		switch {
		case s.GetDeleted():
			d.digests[i] = "(none: this version records the skill's removal)"
			text[i] = []string{fmt.Sprintf("(v%d records the removal of %s by %s)", s.GetVersion(), name, s.GetAuthor())}
		case source:
			text[i] = splitLines(s.GetSource())
		case r.GetPlan() == nil:
			var b strings.Builder
			fmt.Fprintf(&b, "%s does not compile now:\n", d.heads[i])
			writeDiagnostics(&b, d.heads[i], r.GetDiagnostics())
			text[i] = splitLines(b.String())
		default:
			text[i] = splitLines(r.GetPlanCard())
		}
		if d.digests[i] == "" {
			d.digests[i] = "(none: it does not compile now)"
		}
	}
	d.same = resp[0].GetPlan().GetDigest() != "" && resp[0].GetPlan().GetDigest() == resp[1].GetPlan().GetDigest()
	d.lines = diffLines(text[0], text[1])
	return d
}

// splitLines is s as lines, without the newline that ends the last; no
// text is no lines.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// The ops of a line diff.
const (
	opEqual  = "equal"  // the same line on both sides
	opChange = "change" // the left line became the right one
	opDelete = "delete" // a line only the left has
	opInsert = "insert" // a line only the right has
)

// diffLine is one line of a side-by-side diff: Left is empty for an
// insert, Right for a delete.
type diffLine struct {
	Op    string `json:"op"`
	Left  string `json:"left"`
	Right string `json:"right"`
}

// maxDiffCells bounds the table of the longest common subsequence: past
// it, the lines between the common start and end are shown as changed
// whole, not matched line by line.
const maxDiffCells = 4_000_000

// diffLines compares a and b line by line (longest common subsequence):
// the lines both keep are equal; between them, the lines removed and
// added are paired as changes, in order, and the rest are deletes (left
// only) or inserts (right only).
func diffLines(a, b []string) []diffLine {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out := make([]diffLine, 0, max(len(a), len(b)))
	for _, l := range a[:pre] {
		out = append(out, diffLine{Op: opEqual, Left: l, Right: l})
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	var dels, ins []string
	flush := func() {
		n := min(len(dels), len(ins))
		for k := range n {
			out = append(out, diffLine{Op: opChange, Left: dels[k], Right: ins[k]})
		}
		for _, l := range dels[n:] {
			out = append(out, diffLine{Op: opDelete, Left: l})
		}
		for _, l := range ins[n:] {
			out = append(out, diffLine{Op: opInsert, Right: l})
		}
		dels, ins = dels[:0], ins[:0]
	}
	if n, m := len(am), len(bm); n > 0 && m > 0 && (n+1)*(m+1) <= maxDiffCells {
		// lcs[i*(m+1)+j] is the length of the longest common subsequence
		// of am[i:] and bm[j:].
		lcs := make([]int32, (n+1)*(m+1))
		at := func(i, j int) int32 { return lcs[i*(m+1)+j] }
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if am[i] == bm[j] {
					lcs[i*(m+1)+j] = at(i+1, j+1) + 1
				} else {
					lcs[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
				}
			}
		}
		i, j := 0, 0
		for i < n && j < m {
			switch {
			case am[i] == bm[j]:
				flush()
				out = append(out, diffLine{Op: opEqual, Left: am[i], Right: bm[j]})
				i, j = i+1, j+1
			case at(i+1, j) >= at(i, j+1):
				dels = append(dels, am[i])
				i++
			default:
				ins = append(ins, bm[j])
				j++
			}
		}
		am, bm = am[i:], bm[j:]
	}
	dels, ins = append(dels, am...), append(ins, bm...)
	flush()
	for _, l := range a[len(a)-suf:] {
		out = append(out, diffLine{Op: opEqual, Left: l, Right: l})
	}
	return out
}

// maxWrapRows is how many rows one line may take in a column; the rest
// of it is cut.
const maxWrapRows = 10

// writeSideBySide prints lines in two columns of colW characters under
// the heads, with the mark of each line between them: | changed, < left
// only, > right only.
func writeSideBySide(w io.Writer, heads [2]string, lines []diffLine, colW int) {
	colW = max(colW, 10)
	row := func(left, mark, right string) {
		pad := colW - len([]rune(left))
		fmt.Fprintln(w, strings.TrimRight(left+strings.Repeat(" ", max(pad, 0))+" "+mark+" "+right, " "))
	}
	row(fitCol(heads[0], colW), " ", fitCol(heads[1], colW))
	for _, l := range lines {
		var left, right []string
		mark := " "
		switch l.Op {
		case opEqual:
			left, right = wrapCol(l.Left, colW), wrapCol(l.Right, colW)
		case opChange:
			left, right, mark = wrapCol(l.Left, colW), wrapCol(l.Right, colW), "|"
		case opDelete:
			left, mark = wrapCol(l.Left, colW), "<"
		case opInsert:
			right, mark = wrapCol(l.Right, colW), ">"
		}
		for k := range max(len(left), len(right)) {
			var lc, rc string
			if k < len(left) {
				lc = left[k]
			}
			if k < len(right) {
				rc = right[k]
			}
			row(lc, mark, rc)
		}
	}
}

// wrapCol lays a line out in a column of width runes: escaped (it holds
// others' words), tabs expanded, wrapped into rows that end with … where
// the line goes on in the next (between words where it can), and cut
// after maxWrapRows rows.
func wrapCol(s string, width int) []string {
	r := []rune(expandTabs(escapeControls(s)))
	var rows []string
	for len(r) > width {
		if len(rows) == maxWrapRows-1 {
			return append(rows, string(r[:width-1])+"…")
		}
		// Break after the last word that fits, when one ends past the
		// middle of the row; else within the word.
		cut, next := width-1, width-1
		if k := lastSpace(r[:width]); k > width/2 {
			cut, next = k, k+1
		}
		rows = append(rows, string(r[:cut])+"…")
		r = r[next:]
	}
	return append(rows, string(r))
}

// lastSpace is the index of the last space in r, -1 if none.
func lastSpace(r []rune) int {
	for i := len(r) - 1; i >= 0; i-- {
		if r[i] == ' ' {
			return i
		}
	}
	return -1
}

// fitCol is s cut to a column of width runes.
func fitCol(s string, width int) string { return fit(expandTabs(escapeControls(s)), width) }

// expandTabs replaces each tab with the spaces to the next multiple of 8
// columns, as a terminal shows it.
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for _, c := range s {
		if c == '\t' {
			n := 8 - col%8
			b.WriteString(strings.Repeat(" ", n))
			col += n
			continue
		}
		b.WriteRune(c)
		col++
	}
	return b.String()
}
