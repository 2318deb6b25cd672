package layout

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 16: `make test` (its test-go part) on a fresh clone (no Jaeger binary) says at the
// end that the tracing tests were skipped and how to run them, and keeps
// go test's exit status; with a binary it says nothing. The target is run
// with a stand-in `go` in BIN (the Makefile puts BIN first on PATH), so
// no test runs.
func TestMakeTestSaysWhenTheJaegerTestsSkip(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, _ := moduleRoot(t)
	run := func(goExit string, jaeger bool) (string, int) {
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\necho go \"$@\"\nexit "+goExit+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if jaeger {
			// With every test server's binary (Jaeger, Mailpit).
			for _, name := range []string{"jaeger", "mailpit"} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		cmd := exec.Command("make", "-s", "-C", root, "test-go", "BIN="+bin) // make test runs it first
		cmd.Env = append(os.Environ(), "TOLLGATE_JAEGER=", "TOLLGATE_MAILPIT=", "MAKEFLAGS=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run("0", false)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 3 || !strings.HasPrefix(lines[0], "go test -race") || !strings.Contains(lines[len(lines)-2], "SKIPPED") ||
		!strings.Contains(lines[len(lines)-1], "make jaeger") || !strings.Contains(lines[len(lines)-1], "TOLLGATE_JAEGER=") {
		t.Errorf("without a Jaeger binary (exit %d):\n%s", code, out)
	}
	if out, code := run("1", false); code == 0 || !strings.Contains(out, "SKIPPED") {
		t.Errorf("a failing go test fails make test, and still says what skipped (exit %d):\n%s", code, out)
	}
	if out, code := run("0", true); code != 0 || strings.Contains(out, "SKIPPED") {
		t.Errorf("with bin/jaeger nothing is said to skip (exit %d):\n%s", code, out)
	}
}
