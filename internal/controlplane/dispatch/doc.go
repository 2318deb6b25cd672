// Package dispatch leases steps to executors: it serves
// ExecutorService.Connect (one session per executor stream), hands each
// dispatch the Runner offers to an executor that offers the tool and has a
// credit, signs grants for side effects, and reports what executors say
// (acks, starts, results, lost leases) back through the runner.Recorder it
// was handed with the offer. It implements runner.Dispatcher and never
// holds the Runner.
//
// Invariants it enforces, and where:
//   - I2 one road, the executor's half: only a lease carries a step to an
//     executor, and only for a dispatch the Runner offered (dispatcher.go,
//     Offer and assign); a side-effecting lease carries a grant signed over
//     run, step, action, ask, payload digest and fence (grant.go), and a
//     step without one is not leased. A tool step the plan took as
//     read-only is refused, not leased, once an executor has advertised
//     the tool as side-effecting (toolviews.go, refuseUngoverned), and what
//     executors advertise makes the catalog stricter, never laxer
//     (toolviews.go).
//   - I7 nothing completed runs twice: every lease has a fence (its
//     attempt), and an ack, start, heartbeat or result at any other fence,
//     or for a lease another session holds, is refused (lease.go, take);
//     a Start is acknowledged durable only after the store committed it
//     (start.go); an ack, start or result recorded by an earlier copy is
//     not applied again (ack.go leasedBefore, start.go startedBefore,
//     results.go reported); a lease lost after its ack is reported to the
//     engine, which re-leases or asks, and one never acked is offered
//     again at the same fence (lease.go lost, reap.go); a loss the store
//     could not record is tried again on each expiry pass (reap.go).
//   - Credits: no executor holds more leases than it offered; a credit is
//     spent by each lease and returned when the lease ends, expires or is
//     refused (dispatcher.go assign, lease.go drop, reap.go).
//
// Names: Drain asks every executor to finish and close its stream (the
// Drain message) and stops new leases; handOut gives waiting offers to
// sessions with credits.
package dispatch
