package approvectl

import (
	"errors"
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
	} {
		err := rpcErr(status.Error(tc.code, tc.msg))
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != ExitRefused || err.Error() != tc.want {
			t.Errorf("%v %q: %v, want %q (exit %d)", tc.code, tc.msg, err, tc.want, ExitRefused)
		}
	}
}
