package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Event applies one event to a run and commits it. build receives the
// store's clock. A refusal that still changed the run (an answer after the
// deadline) is committed and then returned.
func (r *Runner) Event(ctx context.Context, runID string, build func(now time.Time) engine.Event) (engine.Transition, error) {
	tr, err := r.apply(ctx, runID, build)
	if err != nil {
		return tr, err
	}
	if tr.Refusal != nil {
		return tr, tr.Refusal
	}
	return tr, nil
}

// Events applies several events to a run in order and commits them in one
// commit (an event the engine refuses is left out; the others commit). It
// returns the transition of the last event, or the first error. Use it for
// facts that arrive together, such as a read-only step's lease and its
// result.
func (r *Runner) Events(ctx context.Context, runID string, builds ...func(now time.Time) engine.Event) (engine.Transition, error) {
	res, err := r.commitAll(ctx, runID, builds)
	if err != nil {
		return engine.Transition{}, err
	}
	var last engine.Transition
	for _, c := range res {
		if c.err == nil {
			r.effects(context.WithoutCancel(ctx), runID, c.tr)
		}
	}
	for _, c := range res {
		if c.err != nil {
			return c.tr, c.err
		}
		if c.tr.Refusal != nil {
			return c.tr, c.tr.Refusal
		}
		last = c.tr
	}
	return last, nil
}

// apply is the commit loop: read, apply, commit against the version; on a
// conflict read again. Effects run only after their commit.
func (r *Runner) apply(ctx context.Context, runID string, build func(now time.Time) engine.Event) (engine.Transition, error) {
	res, err := r.commitAll(ctx, runID, []func(time.Time) engine.Event{build})
	if err != nil {
		return engine.Transition{}, err
	}
	if res[0].err != nil {
		return res[0].tr, res[0].err
	}
	r.effects(context.WithoutCancel(ctx), runID, res[0].tr)
	return res[0].tr, nil
}

// liveEffects drops dispatches that a later event of the same batch
// cancelled: only a step still queued at that attempt goes out.
func liveEffects(run *engine.Run, effects []engine.Effect) []engine.Effect {
	out := effects[:0:0]
	for _, e := range effects {
		if d, ok := e.(engine.Dispatch); ok {
			if s := run.Steps[d.Step]; s == nil || s.Status != engine.StatusQueued || s.Attempt != d.Attempt {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// decides reports whether ev is a decision, which deadlineOf binds.
func decides(ev engine.Event) bool {
	switch ev.(type) {
	case engine.Decide, engine.Answer:
		return true
	}
	return false
}

// deadlineOf is the deadline the store must still be before when a
// decision commits: the decided ask's.
func deadlineOf(run *engine.Run, ev engine.Event) time.Time {
	var id string
	switch e := ev.(type) {
	case engine.Decide:
		id = e.Ask
	case engine.Answer:
		id = e.Ask
	default:
		return time.Time{}
	}
	if a, ok := run.Asks[id]; ok && a.State == engine.AskPending {
		return a.ExpiresAt
	}
	return time.Time{}
}

// commitFor turns a transition into a store commit: the run row, the ask
// rows that changed, and the journal records chained after the head.
func commitFor(before *engine.Run, prev store.Run, tr engine.Transition, skill string) (store.Commit, error) {
	run := tr.Run
	// The compact form (engine.EncodeStored): valid JSON, a third of the
	// size of the run's JSON object, and cheaper to write and read.
	data, err := engine.EncodeStored(run)
	if err != nil {
		return store.Commit{}, fmt.Errorf("encode run: %w", err)
	}
	sr := store.Run{ID: run.ID, Version: run.Version, State: string(run.State), Requester: run.Requester, Skill: skill,
		PlanDigest: run.PlanDigest, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt, Data: data}
	var asks []store.Ask
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		a := run.Asks[id]
		if before != nil {
			if old, ok := before.Asks[id]; ok && old.State == a.State && old.Audience == a.Audience && old.DueAt().Equal(a.DueAt()) {
				continue
			}
		}
		asks = append(asks, askRow(run, a))
	}
	recs := make([]store.JournalRecord, 0, len(tr.Records))
	for _, rec := range tr.Records {
		payload, err := json.Marshal(rec.Payload)
		if err != nil {
			return store.Commit{}, fmt.Errorf("encode journal record: %w", err)
		}
		recs = append(recs, store.JournalRecord{Time: rec.At, Actor: rec.Actor, Kind: string(rec.Kind), Payload: payload})
	}
	sr.JournalSeq, sr.JournalHead = store.Chain(run.ID, prev.JournalSeq, prev.JournalHead, recs)
	return store.Commit{Run: sr, ExpectVersion: run.Version - 1, Asks: asks, Journal: recs}, nil
}

func askRow(run *engine.Run, a *engine.AskRun) store.Ask {
	return store.Ask{ID: store.AskID(run.ID, a.ID), RunID: run.ID, Title: a.Title, State: string(a.State),
		Audience: audienceKey(run.Requester, a.Audience), Requester: run.Requester, CreatedAt: a.OpenedAt, DueAt: a.DueAt()}
}

// audienceKey is how the inbox indexes who an ask is for.
func audienceKey(requester, audience string) string {
	if audience == "" || audience == plan.AudienceRequester {
		return "user:" + requester
	}
	return "role:" + audience
}
