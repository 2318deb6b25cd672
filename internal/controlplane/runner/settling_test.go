package runner

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/store"
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

// seenAtCommit is a store that records, as each commit that opens an ask
// becomes visible, whether the runner already said the run was settling.
type seenAtCommit struct {
	store.Store
	r        *Runner
	opened   int
	unsettle int // commits that opened an ask while the run was not settling
}

func (s *seenAtCommit) Commit(ctx context.Context, c store.Commit) error {
	if err := s.Store.Commit(ctx, c); err != nil {
		return err
	}
	for _, rec := range c.Journal {
		if rec.Kind == string(engine.JournalAskOpened) {
			s.opened++
			if !s.r.Settling(c.Run.ID) {
				s.unsettle++
			}
			break
		}
	}
	return nil
}

// A watcher that polls the store (another wake, its ticker) between the
// commit that opens an ask and that ask's hook must see the run settling
// too: it would otherwise report the run waiting on a person just before
// a standing approval decides the ask (CI saw run --wait exit 8 so). The
// run is settling from before the commit is written.
func TestSettlingFromBeforeTheCommitThatOpensAnAsk(t *testing.T) {
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	res := compiler.Compile("ask me as kind:\n  which diagram?\n  options: sequence | class\ndrawing: draw a {kind} diagram\n", compiler.Options{Catalog: cat})
	if res.Plan == nil {
		t.Fatal(compiler.FormatDiagnostics("", res.Diagnostics))
	}
	st := &seenAtCommit{Store: memstore.New(memstore.Config{})}
	h := &seeingHook{}
	r := New(Config{Store: st, Asks: h})
	st.r, h.r = r, r
	h.w = r.Follow(AnyRun)
	defer h.w.Stop()
	run, _, err := r.Start(context.Background(), StartRequest{Plan: res.Plan, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if st.opened != 1 || st.unsettle != 0 {
		t.Fatalf("commits opening an ask: %d, of them visible while the run was not settling: %d; want 1 and 0", st.opened, st.unsettle)
	}
	if r.Settling(run.ID) {
		t.Error("still settling after the hook returned")
	}
}
