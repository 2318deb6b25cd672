package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/jaegerserver"
)

// traceCost runs the sustained workload on fresh worlds, tracing off and
// then on at each -trace-sample (the control plane exporting every
// sampled span over OTLP to a real Jaeger on loopback, in-memory
// storage), and reports the throughput lost in percent, one result a
// sample.
func (b *bench) traceCost(ctx context.Context) ([]Result, error) {
	if err := tracingReady(ctx); err != nil {
		return nil, err
	}
	bin, err := jaegerserver.Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(b.cfg.dir, "tollgate-bench-jaeger-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	j, err := jaegerserver.Start(bin, dir)
	if err != nil {
		return nil, err
	}
	defer j.Stop()
	b.progress("trace: Jaeger on %s; sustained with tracing off", j.OTLPEndpoint)
	off, err := b.sustained(ctx, "sustained-trace-off", worldConfig{})
	if err != nil {
		return nil, fmt.Errorf("tracing off: %w", err)
	}
	var out []Result
	for _, sample := range b.cfg.traceSamples {
		b.progress("trace: off %s steps/s; now with tracing on (sample %g)", thousands(off.StepsPerSec), sample)
		on, err := b.sustained(ctx, fmt.Sprintf("sustained-trace-on-%g", sample), worldConfig{OTLPEndpoint: j.OTLPEndpoint, TraceSample: sample})
		if err != nil {
			return nil, fmt.Errorf("tracing on (sample %g): %w", sample, err)
		}
		// The spans must have arrived, or "on" measured nothing.
		services, err := waitServices(ctx, j)
		if err != nil {
			return nil, err
		}
		out = append(out, traceResult(off, on, sample, services))
	}
	return out, nil
}

// traceResult is the cost of tracing at sample: on against off.
func traceResult(off, on Result, sample float64, services []string) Result {
	cost := (off.StepsPerSec - on.StepsPerSec) / off.StepsPerSec * 100
	return Result{Key: "trace-cost", Kind: kindPercent, Runs: off.Runs + on.Runs, Clients: on.Clients, Value: cost,
		Seconds: off.Seconds + on.Seconds,
		Note: fmt.Sprintf("sample %g, exported to Jaeger (services %s); p99 off %s, on %s; off %s steps/s, on %s steps/s; Tollgate's CPU per run off %.0f µs, on %.0f µs", sample,
			strings.Join(services, ", "), fmtMs(off.P99Ms), fmtMs(on.P99Ms), thousands(off.StepsPerSec), thousands(on.StepsPerSec),
			off.Extra["tollgate_cpu_us_per_run"], on.Extra["tollgate_cpu_us_per_run"]),
		Extra: map[string]float64{"off_steps_per_sec": off.StepsPerSec, "on_steps_per_sec": on.StepsPerSec,
			"off_p99_ms": off.P99Ms, "on_p99_ms": on.P99Ms,
			"off_go_cpu_us_per_run": off.Extra["go_cpu_us_per_run"], "on_go_cpu_us_per_run": on.Extra["go_cpu_us_per_run"],
			// The same cost as CPU per run (control plane + executor +
			// Redis, cpusplit.go), which depends less on what else the
			// machine does than throughput; Jaeger's own CPU is not in it.
			"off_tollgate_cpu_us_per_run": off.Extra["tollgate_cpu_us_per_run"], "on_tollgate_cpu_us_per_run": on.Extra["tollgate_cpu_us_per_run"],
			"cpu_cost_pct": (on.Extra["tollgate_cpu_us_per_run"]/off.Extra["tollgate_cpu_us_per_run"] - 1) * 100,
			"sample":       sample}}
}

// tracingReady says why -trace cannot run here, if it cannot: no Jaeger
// binary (make jaeger).
func tracingReady(context.Context) error {
	_, err := jaegerserver.Binary()
	return err
}

// waitServices waits (Jaeger stores spans asynchronously; the control
// plane flushes as it shuts down) until Jaeger holds spans of a service.
func waitServices(ctx context.Context, j *jaegerserver.Jaeger) ([]string, error) {
	deadline := time.Now().Add(30 * time.Second)
	want := []string{"tollgate-controlplane", "tollgate-executor"}
	for {
		s, err := j.Services(ctx)
		if err == nil && !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(s, w) }) {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("tracing was on, yet Jaeger holds spans of %v after 30 s, not of both %v (last error: %v)\n%s", s, want, err, j.Log())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
