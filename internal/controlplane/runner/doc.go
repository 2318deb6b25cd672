// Package runner is the one road (I2): every run a replica moves — from
// the API, a gate from code, an executor's report, a retry, a resume after
// a restart — moves through a Runner, and a Runner moves it only through
// the engine.
//
// Invariants it enforces, and where:
//   - I2 one road: Start, Event and Events are the only ways to change a
//     run (start.go, commit.go); Recover offers again what a previous
//     process left in flight (recover.go).
//   - I3 a run holding a question is never terminal: a transition is
//     committed in one write with its ask rows and journal records
//     (commitFor, commit.go; groupcommit.go), and its effects run only
//     after that commit (effects.go).
//   - I4 deadlines enforced by readers: Get (GetRuns, for a page) applies
//     any deadline that has passed before it returns a run, whether or not
//     the sweep ran (readers_enforce_deadlines.go); a decision commits only
//     while the store's clock is before its ask's deadline (deadlineOf,
//     commit.go).
//   - I7 nothing completed runs twice: Recover reports in-flight attempts
//     lost to the engine, which asks about side effects rather than
//     running them again — only attempts whose replica is gone: a lease
//     of a live replica is left to it, and Takeover looks again once its
//     heartbeat lapses (recover.go); a commit whose outcome is unknown
//     is offered again only once it is known (unsure.go).
//   - I8 the record is the truth: every commit chains its journal records
//     after the run's head (commit.go).
//   - Replicas are one control plane (work.go): the commit that queues a
//     step enqueues its work in the store, claimed at once by this
//     replica when it serves the tool (direct hand-off), else left for any
//     replica that does (Claim, Claiming); an attempt in flight keeps an
//     entry in LeaseQueue under the replica holding its lease, so when
//     that replica dies a survivor reports it lost unless it was
//     re-attached (leaseClaimed); the claims of replicas gone are released
//     (ReleaseClaims); a step is blocked only when no live replica serves
//     its tool (Announce, unserved). Another replica's commit reaches this
//     one's watchers as a hint (Hinted, watch.go); hints are never the
//     truth, watchers read the store. Notices go out through an Outbox
//     (seams.go): written in the commit that causes them, so none is lost.
//
// The Runner calls a Dispatcher, Observers and an AskHook (seams.go); it
// hands itself to the dispatcher and the hook as a Recorder on each call,
// so it is built with them and nothing is wired after construction.
package runner
