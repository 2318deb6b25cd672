//go:build faults

package faults

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// armFor arms spec for the test, and disarms everything after it.
func armFor(t *testing.T, spec string) {
	t.Helper()
	if err := arm(spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := arm(""); err != nil {
			t.Error(err)
		}
	})
}

// stderrOf runs f with os.Stderr captured, and returns what it wrote.
func stderrOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = old }()
	out := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		out <- b
	}()
	f()
	w.Close()
	return string(<-out)
}

func TestFailFiresOnNthHitOnce(t *testing.T) {
	armFor(t, "runner.in-group-commit=fail@3")
	var errs []error
	said := stderrOf(t, func() {
		for range 6 {
			errs = append(errs, At(InGroupCommit))
			if err := At(AfterCommit); err != nil { // not armed
				t.Errorf("At(%s) = %v, want nil", AfterCommit, err)
			}
		}
	})
	for i, err := range errs {
		if i == 2 {
			if !errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), string(InGroupCommit)) {
				t.Errorf("hit %d: %v, want ErrInjected naming the point", i+1, err)
			}
		} else if err != nil {
			t.Errorf("hit %d: %v, want nil", i+1, err)
		}
	}
	if want := "tollgate-faults: runner.in-group-commit fail\n"; said != want {
		t.Errorf("stderr %q, want %q", said, want)
	}
}

func TestPauseFiresOnNthHitOnce(t *testing.T) {
	const pause = 150 * time.Millisecond
	armFor(t, "dispatch.after-lease-sent=pause:150ms@2")
	var took []time.Duration
	said := stderrOf(t, func() {
		for range 4 {
			start := time.Now()
			if err := At(AfterLeaseSent); err != nil {
				t.Errorf("At = %v, want nil", err)
			}
			took = append(took, time.Since(start))
		}
	})
	for i, d := range took {
		if i == 1 && d < pause {
			t.Errorf("hit 2 took %s, want at least %s", d, pause)
		}
		if i != 1 && d >= pause {
			t.Errorf("hit %d took %s, want no pause", i+1, d)
		}
	}
	if want := "tollgate-faults: dispatch.after-lease-sent pause 150ms\n"; said != want {
		t.Errorf("stderr %q, want %q", said, want)
	}
}

// TestConcurrentHits: hits from many goroutines fire the action exactly
// once.
func TestConcurrentHits(t *testing.T) {
	armFor(t, "grant.after-signed=fail@50")
	var mu sync.Mutex
	fired := 0
	stderrOf(t, func() {
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				for range 20 {
					if err := At(AfterGrantSigned); err != nil {
						mu.Lock()
						fired++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	})
	if fired != 1 {
		t.Fatalf("fired %d times in 200 hits, want once", fired)
	}
}

func TestArmRefusesBadSpec(t *testing.T) {
	armFor(t, "runner.after-commit=fail")
	if err := arm("runner.after-comit=fail"); err == nil {
		t.Fatal("arm took an unknown point")
	}
	if err := atQuiet(t, AfterCommit); !errors.Is(err, ErrInjected) {
		t.Fatalf("the armed set changed on a refused spec: %v", err)
	}
}

// atQuiet is At(p), its line on stderr swallowed.
func atQuiet(t *testing.T, p Point) (err error) {
	t.Helper()
	stderrOf(t, func() { err = At(p) })
	return err
}

// helperEnv names the point TestHelperProcess hits (three times) when the
// test binary runs as a child of the tests below.
const helperEnv = "TOLLGATE_FAULTS_TEST_HELPER"

func TestHelperProcess(t *testing.T) {
	p := os.Getenv(helperEnv)
	if p == "" {
		t.Skip("run as a child process by TestKill, TestFailFromEnv and TestBadSpecExits")
	}
	for i := range 3 {
		if err := At(Point(p)); err != nil {
			os.Stdout.WriteString("failed at hit " + string(rune('1'+i)) + "\n")
		}
	}
	os.Stdout.WriteString("survived\n")
	os.Exit(0)
}

func child(t *testing.T, spec string, p Point) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), EnvVar+"="+spec, helperEnv+"="+string(p))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// TestKill: armed from the environment, kill@2 kills the process with
// SIGKILL on the second hit, after its line on stderr.
func TestKill(t *testing.T) {
	stdout, stderr, err := child(t, "executor.after-tool-call=kill@2", AfterToolCall)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v, want it killed; stdout %q stderr %q", err, stdout, stderr)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended %v, want killed by SIGKILL; stderr %q", exit, stderr)
	}
	if want := "tollgate-faults: executor.after-tool-call kill\n"; !strings.Contains(stderr, want) {
		t.Errorf("child stderr %q, want %q", stderr, want)
	}
	if strings.Contains(stdout, "survived") {
		t.Errorf("child went on after kill: %q", stdout)
	}
}

// TestFailFromEnv: armed from the environment, fail@2 fails the second
// hit only, and the process goes on.
func TestFailFromEnv(t *testing.T) {
	stdout, stderr, err := child(t, "runner.after-commit=fail@2", AfterCommit)
	if err != nil {
		t.Fatalf("child: %v; stderr %q", err, stderr)
	}
	if want := "failed at hit 2\nsurvived\n"; stdout != want {
		t.Errorf("child stdout %q, want %q", stdout, want)
	}
}

// TestBadSpecExits: a spec that does not parse stops the process at
// start with status 2 and the error on stderr; nothing runs unarmed.
func TestBadSpecExits(t *testing.T) {
	stdout, stderr, err := child(t, "runner.after-comit=kill", AfterCommit)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("child: %v, want exit status 2; stdout %q stderr %q", err, stdout, stderr)
	}
	if !strings.Contains(stderr, `unknown point "runner.after-comit"`) {
		t.Errorf("child stderr %q, want the parse error", stderr)
	}
	if strings.Contains(stdout, "survived") {
		t.Errorf("child ran unarmed: %q", stdout)
	}
}
