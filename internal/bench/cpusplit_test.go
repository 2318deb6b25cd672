package bench

import (
	"bytes"
	"context"
	"math"
	"runtime/pprof"
	"testing"

	"github.com/google/pprof/profile"
)

// A profile as the runtime writes it: samples of the clients carry the
// label, the background GC's are divided pro rata, the rest is Tollgate's.
func TestSplitProfileByLabel(t *testing.T) {
	fn := func(id uint64, name string) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: &profile.Function{ID: id, Name: name}}}}
	}
	handler, gc, client := fn(1, "controlplane.(*Services).StartRun"), fn(2, "runtime.gcBgMarkWorker"), fn(3, "bench.(*world).runToEnd")
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Location:   []*profile.Location{handler, gc, client},
		Function:   []*profile.Function{handler.Line[0].Function, gc.Line[0].Function, client.Line[0].Function},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{handler}, Value: []int64{3, 30}},
			{Location: []*profile.Location{gc}, Value: []int64{5, 50}},
			{Location: []*profile.Location{client}, Value: []int64{1, 10}, Label: map[string][]string{roleLabel: {roleClient}}},
			// A label of another name or value is not the clients'.
			{Location: []*profile.Location{handler}, Value: []int64{1, 10}, Label: map[string][]string{roleLabel: {"other"}}},
		},
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	s, err := splitProfile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if s != (cpuSplit{Client: 10, Server: 40, GC: 50}) {
		t.Fatalf("split %+v", s)
	}
	if got := s.ClientShare(); math.Abs(got-0.2) > 1e-9 {
		t.Fatalf("client share %v, want 0.2", got)
	}
	if (cpuSplit{}).ClientShare() != 0 {
		t.Fatal("no samples: no share")
	}
	if _, err := splitProfile([]byte("not a profile")); err == nil {
		t.Fatal("garbage parsed as a profile")
	}
}

// The label reaches the goroutines a client starts (as gRPC's transport
// goroutines are started by the client's connection).
func TestClientLabelIsInherited(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skip("a CPU profile is already running:", err) // only under go test -cpuprofile
	}
	done := make(chan struct{})
	asClient(context.Background(), func(context.Context) {
		go func() { // started under the label
			if spin() == 1 {
				t.Log("unlikely")
			}
			close(done)
		}()
	})
	<-done
	pprof.StopCPUProfile()
	s, err := splitProfile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if s.Client == 0 {
		t.Fatalf("the child goroutine's CPU is not the client's: %+v", s)
	}
}

// spin burns ~200 ms of CPU (20 profiler samples); its result keeps the
// loop from being optimised away.
func spin() int {
	x := 0
	for i := range 400_000_000 {
		x ^= i
	}
	return x
}
