package faults

// Point names one crash point. Its value is what TOLLGATE_FAULTS names.
type Point string

// The crash points. Each comment says where the point sits (file and
// function) and what its fail action does there; a point whose caller has
// no error to take ignores fail (kill and pause work everywhere). A point
// is hit each time the code passes it, so @N counts every pass in the
// process, of every run.
const (
	// AfterCommit is in the control plane's runner, after a commit of a
	// run (the store accepted it) and before its effects are dispatched
	// (steps offered to executors, asks' hooks, watchers woken, steps
	// marked blocked; its notices are in the outbox, written by the
	// commit itself). Two places: a run's first commit
	// (internal/controlplane/runner/start.go, Runner.Start, after
	// store.Commit returned nil) and every later one, the group commit
	// (groupcommit.go, Runner.commitBatch, first thing once store.Commit
	// returned nil, before the batch's outcomes go back to the callers
	// that run the effects). Fail is ignored: the commit stands.
	AfterCommit Point = "runner.after-commit"

	// AfterLeaseSent is in the control plane's dispatch, after a Lease
	// message was written to an executor's stream (stream.Send returned
	// nil, in the session's sender goroutine of Dispatcher.Connect,
	// internal/controlplane/dispatch/session.go) and before the
	// executor's ack of it is recorded. Fail is ignored: the lease is
	// out. A pause stalls that stream's sender (what else goes to that
	// executor waits), not the receiving side that records its ack.
	AfterLeaseSent Point = "dispatch.after-lease-sent"

	// AfterStartDurable is in the executor, after the control plane
	// acknowledged a side-effecting lease's Start durable (conn.start
	// returned nil) and before the tool (or, for a prose step, the model)
	// is called: internal/executor/executor.go, conn.execute. Fail is
	// taken as the call failing with an error of no known kind: the tool
	// is not called and the result is a transport error with its outcome
	// unknown, which the control plane reports as a lost lease (the engine
	// asks about the side effect, I7).
	AfterStartDurable Point = "executor.after-start-durable"

	// AfterToolCall is in the executor, after a step's call (the MCP tool,
	// or the model for a prose step) returned and before its result is
	// built and sent: internal/executor/executor.go, conn.execute. Every
	// call passes it, read-only or not. Fail is ignored: the call is made.
	AfterToolCall Point = "executor.after-tool-call"

	// AfterResultReceived is in the control plane's dispatch, after an
	// executor's result of a lease arrived (matched to its lease and
	// fence, the engine event built) and before it is committed:
	// internal/controlplane/dispatch/results.go, Dispatcher.result, just
	// before Recorder.Events. Fail is taken as the commit failing with a
	// store error that is not the store's unavailability
	// (Dispatcher.settle): the result is refused, and the lease is lost —
	// reported lost to the engine once its ack was recorded, else offered
	// again.
	AfterResultReceived Point = "dispatch.after-result-received"

	// AfterStartReceived is in the control plane's dispatch, after an
	// executor's Start of a side-effecting lease arrived (matched to its
	// live, acknowledged lease) and before it is committed:
	// internal/controlplane/dispatch/start.go, Dispatcher.started, just
	// before Recorder.Event. A kill there is the replica dying with the
	// Start not durable: an executor that waits for the durable
	// acknowledgement (I7) calls nothing. Fail is taken as the commit
	// failing with a store error that is not the store's unavailability:
	// the Start is answered not durable.
	AfterStartReceived Point = "dispatch.after-start-received"

	// InGroupCommit is inside the runner's group commit, between building
	// a batch's commit (events applied, run row, asks, journal, work
	// enqueued) and handing it to the store:
	// internal/controlplane/runner/groupcommit.go, Runner.commitBatch,
	// just before store.Commit. Fail is taken as store.Commit failing
	// (not a conflict, not unavailable): every event of the batch fails
	// with it and nothing is committed.
	InGroupCommit Point = "runner.in-group-commit"

	// AfterWebhookSent is after an outbound notice's delivery succeeded
	// (a webhook's endpoint answered 2xx, or Slack or the mail server took
	// it) and before the delivery is recorded: the recorder every outbox
	// delivery carries, internal/controlplane/approvals/notices.go,
	// DeliveryJournal.Delivered, before it journals a Delivered attempt
	// in the run (and so before the Deliverer finishes the outbox entry,
	// deliverer.go). Killed here, the notice is sent again after a
	// restart. Fail is taken as the record failing: the attempt is not
	// journaled (the sender logs it), and the delivery stays final.
	AfterWebhookSent Point = "notify.after-webhook-sent"

	// AfterGrantSigned is after a grant is signed and before it is
	// returned. Two places: a side-effecting lease's grant
	// (internal/controlplane/dispatch/grant.go, Dispatcher.grantFor; it
	// runs under the dispatcher's lock, so a pause there stalls all of
	// dispatch) and an approved gate's grant
	// (internal/controlplane/api/gatesvc/gates.go, Service.gateGrant).
	// Fail is taken as the grant not being signed: the lease is not sent
	// and its offer waits for the next hand-out (as with no signing key);
	// the gate is returned approved without a grant (as by a control
	// plane that signs none).
	AfterGrantSigned Point = "grant.after-signed"
)

// All returns every point, in the order they are declared.
func All() []Point {
	return []Point{AfterCommit, AfterLeaseSent, AfterStartDurable, AfterToolCall,
		AfterResultReceived, AfterStartReceived, InGroupCommit, AfterWebhookSent, AfterGrantSigned}
}
