package runner

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// seeingHook is an AskHook that records, while Opened runs, whether the
// runner says the run is settling and whether its watcher was woken.
type seeingHook struct {
	r        *Runner
	w        *RunWatch
	settling bool
	woken    bool
	calls    int
}

func (h *seeingHook) Opened(_ context.Context, _ Recorder, run *engine.Run, _ string) {
	h.calls++
	h.settling = h.r.Settling(run.ID)
	select {
	case <-h.w.C():
		h.woken = true
	default:
	}
}
func (*seeingHook) Noticed(context.Context, Recorder, *engine.Run, string, engine.NoticeKind) {}
func (*seeingHook) Closed(context.Context, Recorder, *engine.Run, string, engine.AskState)    {}

// Issue 16: while the ask hook of a newly opened ask runs (a standing
// approval may decide the ask in the next commit), the run is settling
// and its watchers are not yet woken; once the hook returns, they are.
func TestWatchersWakeAfterTheAskHook(t *testing.T) {
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	res := compiler.Compile("ask me as kind:\n  which diagram?\n  options: sequence | class\ndrawing: draw a {kind} diagram\n", compiler.Options{Catalog: cat})
	if res.Plan == nil {
		t.Fatal(compiler.FormatDiagnostics("", res.Diagnostics))
	}
	h := &seeingHook{}
	r := New(Config{Store: memstore.New(memstore.Config{}), Asks: h})
	h.r = r
	// The run id is not known before Start: watch every run.
	h.w = r.Follow(AnyRun)
	defer h.w.Stop()
	run, _, err := r.Start(context.Background(), StartRequest{Plan: res.Plan, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if h.calls != 1 || !h.settling || h.woken {
		t.Fatalf("during the hook: calls %d, settling %v, watcher woken %v; want 1, true, false", h.calls, h.settling, h.woken)
	}
	if r.Settling(run.ID) {
		t.Error("still settling after the hook returned")
	}
	select {
	case <-h.w.C():
	default:
		t.Error("the watcher was not woken after the hook")
	}
}
