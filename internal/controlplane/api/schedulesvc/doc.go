// Package schedulesvc serves tollgate.v1.ScheduleService: thin handlers
// over the schedule book (internal/controlplane/schedules), which
// enforces who may write a schedule and what a schedule may be. The
// creator of a schedule is always the authenticated caller.
package schedulesvc
