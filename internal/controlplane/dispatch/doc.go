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
//     executor, and only for a dispatch the Runner offered (Offer, assign
//     in dispatcher.go); a side-effecting lease carries a grant signed over
//     run, step, action, ask, payload digest and fence, or is not leased
//     (grant.go). A step the plan took as read-only is refused once an
//     executor advertised its tool as side-effecting, and what executors
//     advertise makes the catalog stricter, never laxer (toolviews.go).
//   - I7 nothing completed runs twice: an ack, start, heartbeat or result
//     at another fence (the attempt), or for a lease another session
//     holds, is refused (take, lease.go); a Start is acknowledged durable
//     only once committed (start.go); what an earlier copy recorded is not
//     applied again (leasedBefore, startedBefore, reported); a lease lost
//     after its ack goes to the engine, which re-leases or asks, one never
//     acked is offered again at the same fence (lost, lease.go; reap.go),
//     and a loss the store could not record is retried each pass (reap.go).
//
// Replicas (issue 15): Offer refuses what no executor here serves, and
// the Runner leaves it in the store for a replica that does (Serves,
// Wants, Queues feed the claim loop and the replica's announcement); what
// waits here when its executors go away, or when it drains, goes back to
// the store (release). An acked lease whose stream broke waits one lease
// TTL for its executor to re-attach it, here or on another replica
// (reattach.go: rebind, or engine.LeaseMoved from the replica that held
// it); one not re-attached is lost (reap.go), and LeaseLost names this
// replica, so a lease that moved is not lost by the one it left. Another
// replica's commit to a run held here is reconciled (reconcile.go): a
// step no longer in flight is cancelled on its executor.
//
// Credits: no executor holds more leases than it offered; each lease
// spends one, returned when it ends, expires or is refused (assign, drop,
// reap.go). Drain asks every executor to finish and close its stream and
// stops new leases; handOut gives waiting offers to sessions with credits.
// An executor that is stopping says so itself (Leaving, leaving.go): its
// session gets no new lease and serves nothing, and a lease it hands back
// (on its way when it said so, never acked) is offered again at the same
// fence; its leases in hand run on and report as usual.
package dispatch
