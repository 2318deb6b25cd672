// Package schedules keeps schedules and fires them: the book people
// write through the API (Book) and each replica's loop that starts a
// skill's run at each tick (Scheduler).
//
// Invariants it enforces, and where:
//   - One run per tick across replicas: a tick is claimed by a
//     compare-and-set of the schedule's record (store.Schedules) before
//     anything starts, and the run it starts carries a request id derived
//     from the schedule and the tick, so a replica that finishes another's
//     claim (it died, or its start failed) starts the same run, never a
//     second (Scheduler.claim, Scheduler.finish).
//   - Ticks are decided once and in order, never before they are due,
//     missed ones by catch_up, overlapping ones by concurrency
//     (pkg/schedule.Decide, judged by the store's clock).
//   - A schedule never approves on anyone's behalf: its run is started
//     through the one start path (runsvc.Service.Start) as its RunAs, so
//     its gates park and route like any other run's and a `without
//     asking` step runs only where policy lets RunAs approve it; the run
//     and its journal name the schedule and the tick.
//   - Paused means nothing starts: a pause moves the record's version, so
//     a claim computed before it fails, and a resume passes over the
//     ticks that came while paused.
//   - Who may run as whom: a schedule runs as its creator unless an
//     operator made it; its creator, its RunAs and operators may change it
//     (Book).
package schedules
