package approvectl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// push DIR finds every SKILL.md under DIR in path order, leaves hidden
// folders and other files alone, and reads each one within the limit.
func TestPushWalk(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"b-skill/SKILL.md":        "---\nname: greet\n---\nhello: say hello\n",
		"a/nested/tidy/SKILL.md":  "tidy: notes.tidy {}\n",
		"big/SKILL.md":            strings.Repeat("x", 1<<20+1),
		".git/SKILL.md":           "hidden",
		"b-skill/notes/README.md": "not a skill",
	})
	targets, err := pushTargets(root, maxPushFiles, maxWalkEntries)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range targets {
		rel, _ := filepath.Rel(root, tg.file)
		got = append(got, filepath.ToSlash(rel))
	}
	if want := "a/nested/tidy/SKILL.md b-skill/SKILL.md big/SKILL.md"; strings.Join(got, " ") != want {
		t.Fatalf("walk found %q, want %q", got, want)
	}
	for i, want := range []struct{ name, shown, err string }{
		{name: "tidy", shown: "tidy"},    // named by its folder
		{name: "", shown: "greet"},       // its front matter names it: the server reads it there
		{err: "over the limit of 1 MiB"}, // too big: said, not read
	} {
		pf := readPushFile(targets[i].file)
		switch {
		case want.err != "":
			if pf.err == nil || !strings.Contains(pf.err.Error(), want.err) || !strings.Contains(pf.err.Error(), "big") {
				t.Errorf("%s: error %v, want one naming the file and saying %q", got[i], pf.err, want.err)
			}
		case pf.err != nil:
			t.Errorf("%s: %v", got[i], pf.err)
		case pf.name != want.name || pf.shown != want.shown || pf.source == "":
			t.Errorf("%s: name %q shown %q, want %q %q", got[i], pf.name, pf.shown, want.name, want.shown)
		}
	}
}

func TestPushTargets(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"one/SKILL.md":            "hello: say hello\n",
		"one/sub/SKILL.md":        "a skill folder is pushed alone",
		"recipe.txt":              "hello: say hello\n",
		"none/notes.txt":          "",
		"many/a/SKILL.md":         "",
		"many/b/SKILL.md":         "",
		"many/c/SKILL.md":         "",
		"wide/1/2/3/4/5/6/7/8.md": "",
	})
	for _, tc := range []struct {
		path string
		want string // the files, or the error
	}{
		{"one", "one/SKILL.md"},
		{"one/SKILL.md", "one/SKILL.md"},
		{"recipe.txt", "recipe.txt"},
		{"none", "holds no SKILL.md"},
		{"missing", "no such file"},
		{"many", "holds more than 2 SKILL.md files"},
		{"wide", "holds more than 8 files and folders"},
	} {
		targets, err := pushTargets(filepath.Join(root, tc.path), 2, 8)
		var got []string
		for _, tg := range targets {
			rel, _ := filepath.Rel(root, tg.file)
			got = append(got, filepath.ToSlash(rel))
		}
		if err != nil {
			got = []string{err.Error()}
			if ExitCode(err) != ExitUsage {
				t.Errorf("%s: exit %d, want %d", tc.path, ExitCode(err), ExitUsage)
			}
		}
		if s := strings.Join(got, " "); !strings.Contains(s, tc.want) {
			t.Errorf("pushTargets(%s) = %q, want %q", tc.path, s, tc.want)
		}
	}
}
