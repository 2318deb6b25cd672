package controlplane

import (
	"context"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// lateHook hands the Runner's ask notices to Services built after it.
// Interim: it goes when approvals leave the Services.
type lateHook struct{ svc **Services }

func (h lateHook) Opened(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string) {
	(*h.svc).Opened(ctx, rec, run, askID)
}

func (h lateHook) Noticed(ctx context.Context, rec runner.Recorder, run *engine.Run, askID, kind string) {
	(*h.svc).Noticed(ctx, rec, run, askID, kind)
}

func (h lateHook) Closed(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string, state engine.AskState) {
	(*h.svc).Closed(ctx, rec, run, askID, state)
}
