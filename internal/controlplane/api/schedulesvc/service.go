package schedulesvc

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/schedules"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/schedule"
)

// Config is what the ScheduleService needs.
type Config struct {
	Book *schedules.Book
	Now  func(context.Context) (time.Time, error)
}

// Service implements tollgatev1.ScheduleServiceServer.
type Service struct {
	tollgatev1.UnimplementedScheduleServiceServer
	cfg Config
}

var _ tollgatev1.ScheduleServiceServer = (*Service)(nil)

// New returns the ScheduleService.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterScheduleServiceServer(gs, s) }

// maxNext bounds GetSchedule's next ticks.
const maxNext = 50

// PutSchedule creates or replaces a schedule.
func (s *Service) PutSchedule(ctx context.Context, req *tollgatev1.PutScheduleRequest) (*tollgatev1.PutScheduleResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	sp := req.GetSpec()
	if err := api.InputsTooLarge(sp.GetInputs()); err != nil {
		return nil, err
	}
	sc, err := s.cfg.Book.Put(ctx, who, schedules.Spec{Name: sp.GetName(), Skill: sp.GetSkill(), SkillVersion: sp.GetSkillVersion(), Cron: sp.GetCron(),
		Zone: sp.GetTimeZone(), Inputs: sp.GetInputs(), RunAs: sp.GetRunAs(), CatchUp: sp.GetCatchUp(), Concurrency: sp.GetConcurrency(),
		Grace: sp.GetGrace().AsDuration()}, req.GetExpectedVersion())
	if err != nil {
		return nil, err
	}
	return &tollgatev1.PutScheduleResponse{Schedule: s.view(ctx, sc, 5)}, nil
}

// GetSchedule returns a schedule with its next ticks.
func (s *Service) GetSchedule(ctx context.Context, req *tollgatev1.GetScheduleRequest) (*tollgatev1.GetScheduleResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := s.cfg.Book.Read(ctx, who, req.GetName())
	if err != nil {
		return nil, err
	}
	n := int(req.GetNext())
	if n <= 0 {
		n = 5
	}
	return &tollgatev1.GetScheduleResponse{Schedule: s.view(ctx, sc, min(n, maxNext))}, nil
}

// ListSchedules lists every schedule with its next tick.
func (s *Service) ListSchedules(ctx context.Context, req *tollgatev1.ListSchedulesRequest) (*tollgatev1.ListSchedulesResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.cfg.Book.ReadAll(ctx, who, req.GetSkill())
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListSchedulesResponse{}
	for _, sc := range all {
		out.Schedules = append(out.Schedules, s.view(ctx, sc, 1))
	}
	return out, nil
}

// PauseSchedule pauses a schedule.
func (s *Service) PauseSchedule(ctx context.Context, req *tollgatev1.PauseScheduleRequest) (*tollgatev1.PauseScheduleResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := s.cfg.Book.Pause(ctx, who, req.GetName())
	if err != nil {
		return nil, err
	}
	return &tollgatev1.PauseScheduleResponse{Schedule: s.view(ctx, sc, 5)}, nil
}

// ResumeSchedule resumes a schedule from now.
func (s *Service) ResumeSchedule(ctx context.Context, req *tollgatev1.ResumeScheduleRequest) (*tollgatev1.ResumeScheduleResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := s.cfg.Book.Resume(ctx, who, req.GetName())
	if err != nil {
		return nil, err
	}
	return &tollgatev1.ResumeScheduleResponse{Schedule: s.view(ctx, sc, 5)}, nil
}

// DeleteSchedule removes a schedule.
func (s *Service) DeleteSchedule(ctx context.Context, req *tollgatev1.DeleteScheduleRequest) (*tollgatev1.DeleteScheduleResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Book.Delete(ctx, who, req.GetName()); err != nil {
		return nil, err
	}
	return &tollgatev1.DeleteScheduleResponse{}, nil
}

// view is a schedule as the API shows it, with its next n ticks after
// the later of now and its last decided tick (none while paused).
func (s *Service) view(ctx context.Context, sc store.Schedule, n int) *tollgatev1.Schedule {
	out := &tollgatev1.Schedule{
		Spec: &tollgatev1.ScheduleSpec{Name: sc.Name, Skill: sc.Skill, SkillVersion: sc.SkillVersion, Cron: sc.Cron, TimeZone: sc.TimeZone,
			Inputs: sc.Inputs, RunAs: sc.RunAs, CatchUp: sc.CatchUp, Concurrency: sc.Concurrency, Grace: durationpb.New(sc.Grace)},
		Paused: sc.Paused, PausedBy: sc.PausedBy, PausedAt: wire.Time(sc.PausedAt), CreatedBy: sc.CreatedBy, CreatedAt: wire.Time(sc.CreatedAt),
		UpdatedBy: sc.UpdatedBy, UpdatedAt: wire.Time(sc.UpdatedAt), Version: sc.Version, LastTick: wire.Time(sc.LastTick),
		LastRun: sc.LastRun, LastRunTick: wire.Time(sc.LastRunTick), WaitingTick: wire.Time(sc.Buffered),
		Started: sc.Started, Skipped: sc.Skipped, Missed: sc.Missed, LastSkip: sc.LastSkip, LastError: sc.LastError,
	}
	if sc.Paused {
		return out
	}
	c, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil {
		return out
	}
	from := sc.LastTick
	if now, err := s.cfg.Now(ctx); err == nil && now.After(from) {
		from = now
	}
	for _, t := range c.Upcoming(from, n) {
		out.NextTicks = append(out.NextTicks, wire.Time(t))
	}
	return out
}
