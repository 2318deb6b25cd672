package bench

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"

	"github.com/google/pprof/profile"
)

// The bench's clients share the process (and the two cores) with the
// control plane and the executors, so the process's CPU time is theirs
// together. To report what Tollgate itself costs per run (DESIGN.md §12:
// control plane + executor + Redis), the sustained phase is profiled and
// every goroutine of the clients carries a profiler label: the client
// goroutines themselves run under it, and the clients' gRPC connections
// are made under it, so the transport goroutines they start inherit it.
// The control plane's and the executors' goroutines are started by their
// own servers and carry none.
const (
	roleLabel  = "tollgate_bench_role"
	roleClient = "client"
)

// asClient runs f with the client label on this goroutine and on every
// goroutine f starts.
func asClient(ctx context.Context, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(roleLabel, roleClient), f)
}

// cpuSplit is how a CPU profile's samples divide between the clients and
// the rest (control plane, executors, the runtime).
type cpuSplit struct {
	// Client, Server, GC: CPU nanoseconds sampled. GC is the runtime's
	// background mark workers, which serve both sides' allocation.
	Client, Server, GC int64
}

// ClientShare is the clients' share of the process's CPU, with the
// background GC divided in proportion to the rest (each side's
// allocation drives it; assists already run on the allocating
// goroutine, labelled as it is). NaN-free: 0 with no samples.
func (s cpuSplit) ClientShare() float64 {
	if s.Client+s.Server == 0 {
		return 0
	}
	return float64(s.Client) / float64(s.Client+s.Server)
}

// splitProfile reads a CPU profile (pprof's proto) and divides its
// samples by the client label.
func splitProfile(b []byte) (cpuSplit, error) {
	p, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		return cpuSplit{}, fmt.Errorf("cpu profile: %w", err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return cpuSplit{}, fmt.Errorf("cpu profile: no cpu sample type in %v", p.SampleType)
	}
	var s cpuSplit
	for _, smp := range p.Sample {
		v := smp.Value[idx]
		switch {
		case smp.HasLabel(roleLabel, roleClient):
			s.Client += v
		case inBackgroundGC(smp):
			s.GC += v
		default:
			s.Server += v
		}
	}
	return s, nil
}

func inBackgroundGC(smp *profile.Sample) bool {
	for _, loc := range smp.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && strings.HasSuffix(ln.Function.Name, "runtime.gcBgMarkWorker") {
				return true
			}
		}
	}
	return false
}
