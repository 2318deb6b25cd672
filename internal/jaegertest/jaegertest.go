package jaegertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/jaegerserver"
)

// EnvBinary names the environment variable that overrides the binary's path.
const EnvBinary = jaegerserver.EnvBinary

// DefaultWait bounds WaitTrace when its context has no deadline.
const DefaultWait = 30 * time.Second

// Jaeger is a running Jaeger owned by one test: OTLPEndpoint, QueryURL,
// Traces, TraceByID, Services, Pid, ConfigPath and Log are
// jaegerserver's.
type Jaeger struct {
	*jaegerserver.Jaeger
}

// Trace is one trace as Jaeger stored it.
type Trace = jaegerserver.Trace

// Span is one span of a Trace.
type Span = jaegerserver.Span

// Start starts a Jaeger for t and waits until its OTLP receiver accepts
// connections. It is killed (with its process group) when t ends: shut down
// the TracerProvider that exports to it before that, e.g. in a t.Cleanup
// registered after Start (cleanups run last-in, first-out).
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin := Binary(t)
	j, err := jaegerserver.Start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	return &Jaeger{j}
}

// Binary returns the path of the Jaeger binary: $TOLLGATE_JAEGER, or else
// bin/jaeger at the repository root. If there is none the test skips, or
// under CI=true fails.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := jaegerserver.Binary()
	switch {
	case err == nil:
		return p
	case errors.Is(err, jaegerserver.ErrNoBinary) && os.Getenv("CI") != "true":
		t.Skip(err)
	case errors.Is(err, jaegerserver.ErrNoBinary):
		t.Fatal(err.Error() + "; CI must build it before the tests")
	default:
		t.Fatal(err)
	}
	return ""
}

// Config returns the YAML config that Start gives Jaeger (see
// jaegerserver.Config).
func Config(otlpPort, queryHTTPPort, queryGRPCPort int) string {
	return jaegerserver.Config(otlpPort, queryHTTPPort, queryGRPCPort)
}

// WaitTrace polls Traces until one of service's traces satisfies pred and
// returns it; it fails t (from the test's goroutine: it calls t.Fatal) when
// ctx ends first, or after DefaultWait if ctx has no deadline. Spans arrive
// in Jaeger one export at a time, so pred sees partial traces: make it
// check for every span it needs.
func (j *Jaeger) WaitTrace(t testing.TB, ctx context.Context, service string, pred func(Trace) bool) Trace {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	var (
		seen    []Trace
		lastErr error
	)
	for {
		trs, err := j.Traces(ctx, service)
		if err == nil {
			for _, tr := range trs {
				if pred(tr) {
					return tr
				}
			}
			seen = trs
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			var b strings.Builder
			fmt.Fprintf(&b, "jaegertest: no trace of service %q satisfied the predicate (%v); the last poll saw %d trace(s)", service, context.Cause(ctx), len(seen))
			for i, tr := range seen {
				if i == 5 {
					fmt.Fprintf(&b, "\n... and %d more", len(seen)-i)
					break
				}
				fmt.Fprintf(&b, "\n%s", tr)
			}
			if lastErr != nil {
				fmt.Fprintf(&b, "\nthe last query error: %v", lastErr)
			}
			if j.Exited() {
				fmt.Fprintf(&b, "\njaeger has exited; its output:\n%s", j.Log())
			}
			t.Fatal(b.String())
			return Trace{}
		case <-time.After(20 * time.Millisecond):
		}
	}
}
