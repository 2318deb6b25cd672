package main

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The workflows mirror Tollgate's benchmark recipes (test/e2e/bench_test.go):
// every step is a no-op activity, so the figures are the engine's overhead.

const (
	taskQueue    = "bench"
	approveSig   = "approve"
	activityName = "Noop"
)

var activityOpts = workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second}

// Sequential runs n no-op activities one after another, each taking the
// previous one's result, like the recipe "a: …; b: {a}; c: {b}". n = 1 is
// the 1-step run.
func Sequential(ctx workflow.Context, n int) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOpts)
	q := "1"
	for range n {
		if err := workflow.ExecuteActivity(ctx, activityName, q).Get(ctx, &q); err != nil {
			return "", err
		}
	}
	return q, nil
}

// Fan schedules n no-op activities at once (futures) and waits for all,
// like the recipe "together f: s0 … s(n-1)".
func Fan(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOpts)
	futures := make([]workflow.Future, n)
	for i := range n {
		futures[i] = workflow.ExecuteActivity(ctx, activityName, "x")
	}
	for _, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Approval parks on the "approve" signal, then runs one activity: the
// governed step.
func Approval(ctx workflow.Context) error {
	workflow.GetSignalChannel(ctx, approveSig).Receive(ctx, nil)
	ctx = workflow.WithActivityOptions(ctx, activityOpts)
	return workflow.ExecuteActivity(ctx, "Governed").Get(ctx, nil)
}

// activities holds the no-op steps. Governed records, in process, when the
// worker began executing it, keyed by workflow ID.
type activities struct {
	mu      sync.Mutex
	started map[string]chan time.Time
}

func newActivities() *activities {
	return &activities{started: map[string]chan time.Time{}}
}

// Noop returns its input.
func (a *activities) Noop(_ context.Context, q string) (string, error) { return q, nil }

// Governed tells the waiting client the time it started.
func (a *activities) Governed(ctx context.Context) error {
	now := time.Now()
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	select {
	case a.watch(id) <- now:
	default: // a retry: the first start was recorded
	}
	return nil
}

// watch returns the channel that receives the start time of id's governed
// activity.
func (a *activities) watch(id string) chan time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.started[id]
	if !ok {
		ch = make(chan time.Time, 1)
		a.started[id] = ch
	}
	return ch
}

func (a *activities) forget(id string) {
	a.mu.Lock()
	delete(a.started, id)
	a.mu.Unlock()
}

func register(acts *activities) func(worker.Registry) {
	return func(r worker.Registry) {
		r.RegisterWorkflow(Sequential)
		r.RegisterWorkflow(Fan)
		r.RegisterWorkflow(Approval)
		r.RegisterActivity(acts)
	}
}
