package approvectl

import (
	"bytes"
	"strings"
	"testing"
)

func TestDiffLines(t *testing.T) {
	eq := func(l string) diffLine { return diffLine{Op: opEqual, Left: l, Right: l} }
	for _, tc := range []struct {
		name string
		a, b []string
		want []diffLine
	}{
		{"empty", nil, nil, []diffLine{}},
		{"equal", []string{"a", "b"}, []string{"a", "b"}, []diffLine{eq("a"), eq("b")}},
		{"all new", nil, []string{"a"}, []diffLine{{Op: opInsert, Right: "a"}}},
		{"all gone", []string{"a"}, nil, []diffLine{{Op: opDelete, Left: "a"}}},
		{"insert", []string{"a", "c"}, []string{"a", "b", "c"}, []diffLine{eq("a"), {Op: opInsert, Right: "b"}, eq("c")}},
		{"delete", []string{"a", "b", "c"}, []string{"a", "c"}, []diffLine{eq("a"), {Op: opDelete, Left: "b"}, eq("c")}},
		{"change", []string{"a", "b", "c"}, []string{"a", "B", "c"}, []diffLine{eq("a"), {Op: opChange, Left: "b", Right: "B"}, eq("c")}},
		{"change and delete", []string{"a", "b1", "b2", "c"}, []string{"a", "B", "c"},
			[]diffLine{eq("a"), {Op: opChange, Left: "b1", Right: "B"}, {Op: opDelete, Left: "b2"}, eq("c")}},
		{"change and insert", []string{"x", "b"}, []string{"y", "z", "b"},
			[]diffLine{{Op: opChange, Left: "x", Right: "y"}, {Op: opInsert, Right: "z"}, eq("b")}},
		{"moved", []string{"a", "b", "c", "d"}, []string{"b", "c", "a", "d"},
			[]diffLine{{Op: opDelete, Left: "a"}, eq("b"), eq("c"), {Op: opInsert, Right: "a"}, eq("d")}},
		{"empty lines", []string{"", "a", ""}, []string{"", ""}, []diffLine{eq(""), {Op: opDelete, Left: "a"}, eq("")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := diffLines(tc.a, tc.b)
			if len(got) != len(tc.want) {
				t.Fatalf("diffLines = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("line %d: %+v, want %+v (all: %+v)", i, got[i], tc.want[i], got)
				}
			}
		})
	}
}

// Past maxDiffCells the lines between the common start and end are not
// matched: they are changed whole, still every one of them shown.
func TestDiffLinesBounded(t *testing.T) {
	n := 2100 // (n+1)² > maxDiffCells
	a, b := make([]string, n), make([]string, n)
	for i := range n {
		a[i], b[i] = "same", "same"
	}
	a[0], b[0], a[n-1], b[n-1] = "a", "b", "a", "b"
	got := diffLines(append([]string{"head"}, a...), append([]string{"head"}, b...))
	if len(got) != n+1 || got[0].Op != opEqual {
		t.Fatalf("got %d lines starting %+v", len(got), got[0])
	}
	for _, l := range got[1:] {
		if l.Op != opChange {
			t.Fatalf("past the bound, the middle is changed whole: %+v", l)
		}
	}
}

func TestSideBySide(t *testing.T) {
	long := strings.Repeat("abcdefghij", 5) // 50 runes
	for _, tc := range []struct {
		name  string
		lines []diffLine
		colW  int
		want  string
	}{
		{"empty", nil, 10, "L            R\n"},
		{"equal", []diffLine{{Op: opEqual, Left: "same", Right: "same"}}, 10,
			"L            R\nsame         same\n"},
		{"insert", []diffLine{{Op: opInsert, Right: "new"}}, 10,
			"L            R\n           > new\n"},
		{"delete", []diffLine{{Op: opDelete, Left: "old"}}, 10,
			"L            R\nold        <\n"},
		{"change", []diffLine{{Op: opChange, Left: "was", Right: "is"}}, 10,
			"L            R\nwas        | is\n"},
		{"long lines wrap with … and align", []diffLine{{Op: opChange, Left: "0123456789abc", Right: "short"}}, 10,
			"L            R\n012345678… | short\n9abc       |\n"},
		{"long lines wrap between words", []diffLine{{Op: opInsert, Right: "one two three four"}}, 12,
			"L              R\n             > one two…\n             > three four\n"},
		{"a line past maxWrapRows rows is cut", []diffLine{{Op: opDelete, Left: strings.Repeat(long, 4)}}, 16,
			"L                 R\n" + strings.Repeat("x", 0)},
		{"tabs and controls", []diffLine{{Op: opEqual, Left: "a\tb", Right: "\x1b[2J"}}, 12,
			"L              R\na       b      \\x1b[2J\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeSideBySide(&b, [2]string{"L", "R"}, tc.lines, tc.colW)
			got := b.String()
			if tc.name == "a line past maxWrapRows rows is cut" {
				rows := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
				if len(rows) != 1+maxWrapRows {
					t.Fatalf("%d rows, want the head and %d:\n%s", len(rows), maxWrapRows, got)
				}
				for _, r := range rows[1:] {
					if !strings.HasSuffix(r, "… <") || len([]rune(r)) != 16+2 {
						t.Fatalf("row %q: want 15 runes, …, and the mark", r)
					}
				}
				return
			}
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
