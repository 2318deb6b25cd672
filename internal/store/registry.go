package store

import (
	"context"
	"time"
)

// SkillVersion is one version of a saved skill. A skill's versions are its
// history and are append-only: a Put appends a version, a Delete appends a
// tombstone (Deleted, no source), and nothing is ever rewritten or
// removed, so who published what, when, stays readable after a delete.
type SkillVersion struct {
	Name    string `json:"name"`
	Version int64  `json:"version"` // 1, 2, 3… per name, in order of AddSkillVersion
	// Description is the front matter's description.
	Description string `json:"description,omitempty"`
	// Source is the whole SKILL.md as published; empty on a tombstone and
	// in ListSkills rows.
	Source string `json:"source,omitempty"`
	// PlanDigest is the digest of the plan Source compiled to when it was
	// published; empty on a tombstone.
	PlanDigest string    `json:"plan_digest,omitempty"`
	Author     string    `json:"author"`
	At         time.Time `json:"at"`
	// Deleted marks a tombstone: the skill was removed by Author at At.
	Deleted bool `json:"deleted,omitempty"`
	// Origin says how it came: "api" (a person or service published it)
	// or "dir" (the control plane loaded it from its --skills-dir).
	Origin string `json:"origin,omitempty"`
}

// Skills keeps saved skills and their histories.
type Skills interface {
	// AddSkillVersion appends v as version expect+1 of v.Name, where
	// expect is the latest version the caller read (0: the name was never
	// used). ErrConflict, with nothing written, when the latest version is
	// not expect. v.Version is ignored and set; the stored version is
	// returned.
	AddSkillVersion(ctx context.Context, v SkillVersion, expect int64) (SkillVersion, error)
	// SkillVersion returns version of name, or its latest version when
	// version is 0 (which may be a tombstone); ErrNotFound when there is
	// none.
	SkillVersion(ctx context.Context, name string, version int64) (SkillVersion, error)
	// SkillHistory returns up to limit versions of name with Version >
	// after, oldest first, tombstones included, without Source; an empty
	// slice when there are none.
	SkillHistory(ctx context.Context, name string, after int64, limit int) ([]SkillVersion, error)
	// ListSkills returns the latest version of each skill whose latest
	// version is not a tombstone, by name, without Source: up to limit
	// (store.Limit) names after the page token, and the token of the next
	// page ("" at the end).
	ListSkills(ctx context.Context, pageToken string, limit int) ([]SkillVersion, string, error)
}

// Schedule starts runs of a skill on a cron expression. Its definition
// (everything above Version) is written by people through the API; its
// tick state (Version and below) by the control planes' schedulers. Every
// write replaces the whole record against its Version.
type Schedule struct {
	Name  string `json:"name"`
	Skill string `json:"skill"`
	// SkillVersion pins a version; 0 runs the latest at each tick.
	SkillVersion int64             `json:"skill_version,omitempty"`
	Cron         string            `json:"cron"`
	TimeZone     string            `json:"time_zone"`
	Inputs       map[string]string `json:"inputs,omitempty"`
	// RunAs is the identity its runs are started as: their requester.
	RunAs       string `json:"run_as"`
	CatchUp     string `json:"catch_up"`    // "none" | "last"
	Concurrency string `json:"concurrency"` // "allow" | "skip" | "wait"
	// Grace is how late a tick may start and still be on time; a later
	// one was missed (CatchUp says what to do with it).
	Grace     time.Duration `json:"grace"`
	Paused    bool          `json:"paused,omitempty"`
	PausedBy  string        `json:"paused_by,omitempty"`
	PausedAt  time.Time     `json:"paused_at,omitzero"`
	CreatedBy string        `json:"created_by"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedBy string        `json:"updated_by"`
	UpdatedAt time.Time     `json:"updated_at"`

	// Version is the record's compare-and-set token: 1 when created, +1
	// on every write.
	Version int64 `json:"version"`
	// LastTick is the latest tick decided (started, skipped or
	// buffered); ticks are decided in order, never twice.
	LastTick time.Time `json:"last_tick,omitzero"`
	// Pending is a tick claimed to start whose run is not yet recorded
	// in LastRun: any replica may finish it (the start is idempotent by
	// its RequestID).
	Pending *TickClaim `json:"pending,omitempty"`
	// Buffered is a tick that waits for LastRun to end (concurrency
	// "wait"); zero when none.
	Buffered time.Time `json:"buffered,omitzero"`
	// LastRun is the run the latest started tick made, and LastRunTick
	// that tick.
	LastRun     string    `json:"last_run,omitempty"`
	LastRunTick time.Time `json:"last_run_tick,omitzero"`
	// Started, Skipped and Missed count ticks by what became of them.
	Started int64 `json:"started,omitempty"`
	Skipped int64 `json:"skipped,omitempty"`
	Missed  int64 `json:"missed,omitempty"`
	// LastSkip says why the latest skipped or missed tick did not start.
	LastSkip string `json:"last_skip,omitempty"`
	// LastError is why the latest start failed (e.g. the skill no longer
	// compiles, policy refused a gate); "" after a start succeeds.
	LastError string `json:"last_error,omitempty"`
}

// TickClaim is a tick one scheduler claimed to start.
type TickClaim struct {
	Tick time.Time `json:"tick"`
	// RequestID is the start's idempotency key, scoped to the schedule's
	// RunAs: every replica that finishes the claim starts the same run.
	RequestID string `json:"request_id"`
	// RunAs is whom the run starts as, fixed when the tick was claimed: a
	// change of the schedule's RunAs meanwhile must not start a second run
	// under another requester's key.
	RunAs string    `json:"run_as,omitempty"`
	By    string    `json:"by"` // the replica that claimed it
	At    time.Time `json:"at"`
}

// Schedules keeps schedules.
type Schedules interface {
	// PutSchedule writes s as version expect+1: expect 0 creates it
	// (ErrConflict if the name exists), else the stored version must be
	// expect and the stored CreatedAt s.CreatedAt (ErrConflict otherwise,
	// nothing written): a schedule deleted and created again is another
	// life whose versions start again at 1, and a writer holding the old
	// one must not overwrite it. s.Version is ignored and set; the stored
	// schedule is returned.
	PutSchedule(ctx context.Context, s Schedule, expect int64) (Schedule, error)
	// GetSchedule returns a schedule or ErrNotFound.
	GetSchedule(ctx context.Context, name string) (Schedule, error)
	// ListSchedules returns every schedule, by name.
	ListSchedules(ctx context.Context) ([]Schedule, error)
	// DeleteSchedule removes a schedule at version expect (ErrConflict if
	// it moved on, ErrNotFound if there is none).
	DeleteSchedule(ctx context.Context, name string, expect int64) error
}
