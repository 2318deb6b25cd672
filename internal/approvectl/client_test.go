package approvectl

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Issue 16: an error says what it is once ("not found: run r_nope", not
// "not found: run r_nope: not found"), and keeps its exit code.
func TestRPCErrorsSayTheirKindOnce(t *testing.T) {
	for _, tc := range []struct {
		code      codes.Code
		msg, want string
	}{
		{codes.NotFound, "run r_nope: not found", "not found: run r_nope"},
		{codes.NotFound, "no such thing r1/nope", "not found: no such thing r1/nope"},
		{codes.PermissionDenied, "alice may not decide pay: permission denied", "permission denied: alice may not decide pay"},
		{codes.NotFound, "not found", "not found"},
		{codes.Unauthenticated, "", "not signed in"},
		// a kind wrapping its cause, as errkind's %w: %w does
		{codes.PermissionDenied, "bob may not decide pay: permission denied: over the limit of 100000", "permission denied: bob may not decide pay: over the limit of 100000"},
		{codes.NotFound, "not found: run r_nope", "not found: run r_nope"},
	} {
		err := rpcErr(status.Error(tc.code, tc.msg))
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != ExitRefused || err.Error() != tc.want {
			t.Errorf("%v %q: %v, want %q (exit %d)", tc.code, tc.msg, err, tc.want, ExitRefused)
		}
	}
}

// Issue 16: a control plane that cannot be reached is named with what to
// do (start it, check --server), the cause after it; exit 3.
func TestUnreachableServerSaysWhatToDo(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	for _, args := range [][]string{{"asks"}, {"runs", "show", "r_1"}, {"audit"}} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), append(args, "--server", addr, "--token", "tok"), Config{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }})
		if code := ExitCode(err); code != ExitInternal {
			t.Errorf("%v: exit %d, want %d", args, code, ExitInternal)
		}
		msg := stderr.String()
		for _, want := range []string{"cannot reach the control plane at " + addr, "controlplane --dev", "--server / $TOLLGATE_SERVER", "cause: ", "connection refused"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, msg)
			}
		}
	}
}

// Issue 16: a run id of the wrong form is bad usage (exit 2), as an ask
// id of the wrong form is.
func TestRunIDOfTheWrongFormIsBadUsage(t *testing.T) {
	for _, args := range [][]string{{"runs", "show", "r_1/ask_1"}, {"runs", "cancel", "r_1/ask_1"}, {"runs", "show", "/x"}, {"audit", "--run", "r_1/ask_1"},
		{"gate", "claims", "--summary", "s", "--run", "r_1/claims"}, {"step", "x", "--run", "r_1/claims", "--", "true"}, {"finish", "--run", "r 1"}} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), append(args, "--server", "127.0.0.1:1", "--token", "tok"), Config{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }})
		if code := ExitCode(err); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, ExitUsage, stderr.String())
		}
	}
}
