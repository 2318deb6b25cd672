package gates

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/grant"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// Outcome is where a gate is.
type Outcome string

// Outcomes.
const (
	Pending   Outcome = "pending"
	Approved  Outcome = "approved"
	Rejected  Outcome = "rejected"
	Expired   Outcome = "expired"
	Cancelled Outcome = "cancelled"
)

var outcomes = map[tollgatev1.GateOutcome]Outcome{
	tollgatev1.GateOutcome_GATE_OUTCOME_PENDING: Pending, tollgatev1.GateOutcome_GATE_OUTCOME_APPROVED: Approved,
	tollgatev1.GateOutcome_GATE_OUTCOME_REJECTED: Rejected, tollgatev1.GateOutcome_GATE_OUTCOME_EXPIRED: Expired,
	tollgatev1.GateOutcome_GATE_OUTCOME_CANCELLED: Cancelled,
}

// Artifact is a file or bytes the approver reads; its digest is bound
// into the decision packet.
type Artifact struct {
	Name      string
	MediaType string
	Content   []byte
}

// Options describe a gate. Only Summary is required.
type Options struct {
	// RequestID makes creating the run idempotent when run is ""; random
	// when empty.
	RequestID string
	// RunName names a run the gate creates.
	RunName   string
	Summary   string
	Artifacts []Artifact
	// Payload is the action's args as a JSON object: what the grant
	// binds. Empty: the artifacts' digests (grant.ArtifactsPayload).
	Payload []byte
	// Action is a further "server.tool" whose policy must hold too: the
	// gate is always decided under "gate.NAME", and its grant permits
	// that (grant.GateAction); Action only raises the bar.
	Action    string
	Approvers []string
	Quorum    int
	Expires   time.Duration
	// OnExpiry is "" (the run ends expired), "reject" or "cancel".
	OnExpiry string
	// NoWait returns right after the gate is opened (or found).
	NoWait bool
	// Progress, if set, is called with the gate while it waits: once
	// when waiting starts and on every change of its run.
	Progress func(Decision)
}

// Decision is a gate as it stands.
type Decision struct {
	RunID   string
	Gate    string
	Outcome Outcome
	// Actor decided it (approved or rejected); At is when it was decided,
	// expired or cancelled.
	Actor string
	At    time.Time
	// Option is the option chosen ("1", Approve) when Approved.
	Option string
	Reason string
	// Grant is set when Approved and the control plane signs grants.
	Grant *grant.Grant
	// Created is false when the gate already existed: it was not asked
	// again.
	Created bool
	// Ask is the whole decision packet.
	Ask *tollgatev1.Ask
}

// Client talks to one control plane.
type Client struct {
	gates tollgatev1.GateServiceClient
	runs  tollgatev1.RunServiceClient
	// Retry is the pause after a transient error while waiting (the
	// control plane restarting); default one second.
	Retry time.Duration
}

// New returns a client on conn. Its calls use the one message limit
// every Tollgate sender and receiver shares (limits.MaxMessageBytes),
// whatever conn's own defaults are.
func New(conn grpc.ClientConnInterface) *Client {
	conn = limitedConn{conn}
	return &Client{gates: tollgatev1.NewGateServiceClient(conn), runs: tollgatev1.NewRunServiceClient(conn), Retry: time.Second}
}

// limitedConn adds the message limit to every call.
type limitedConn struct{ grpc.ClientConnInterface }

func callLimits(opts []grpc.CallOption) []grpc.CallOption {
	return append([]grpc.CallOption{grpc.MaxCallRecvMsgSize(limits.MaxMessageBytes), grpc.MaxCallSendMsgSize(limits.MaxMessageBytes)}, opts...)
}

func (c limitedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, callLimits(opts)...)
}

func (c limitedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.ClientConnInterface.NewStream(ctx, desc, method, callLimits(opts)...)
}

// Gate opens gate name on run ("" creates an external run) and, unless
// o.NoWait, blocks until a person decides it or ctx ends. A gate already
// on the run is not asked again: its decision, or its wait, is returned.
// The error is nil for every decided outcome (the caller switches on
// Outcome); it is set only when the gate could not be opened or read.
func (c *Client) Gate(ctx context.Context, run, name string, o Options) (Decision, error) {
	req := &tollgatev1.OpenGateRequest{RunId: run, RequestId: o.RequestID, RunName: o.RunName, Gate: name, Summary: o.Summary,
		PayloadJson: string(o.Payload), Action: o.Action, Approvers: o.Approvers, Quorum: int32(o.Quorum)}
	if run == "" && req.RequestId == "" {
		req.RequestId = randomID()
	}
	for _, a := range o.Artifacts {
		req.Artifacts = append(req.Artifacts, &tollgatev1.EvidenceUpload{Name: a.Name, MediaType: a.MediaType, Content: a.Content})
	}
	if o.Expires > 0 {
		req.Expires = durationpb.New(o.Expires)
	}
	switch o.OnExpiry {
	case "":
	case "reject":
		req.OnExpiry = tollgatev1.OnExpiry_ON_EXPIRY_REJECT
	case "cancel":
		req.OnExpiry = tollgatev1.OnExpiry_ON_EXPIRY_CANCEL
	default:
		return Decision{}, fmt.Errorf("on expiry %q: want reject or cancel", o.OnExpiry)
	}
	resp, err := c.gates.OpenGate(ctx, req)
	if err != nil {
		return Decision{}, fmt.Errorf("open gate %s: %w", name, err)
	}
	d := fromProto(resp.GetRunId(), resp.GetGate())
	d.Created = resp.GetCreated()
	if o.NoWait || d.Outcome != Pending {
		return d, nil
	}
	w, err := c.Wait(ctx, d.RunID, name, o.Progress)
	w.Created = d.Created
	return w, err
}

// CreateRun creates an external run, or finds the one created with the
// same requestID before; it returns the run id and whether it is new.
func (c *Client) CreateRun(ctx context.Context, requestID, name string) (string, bool, error) {
	resp, err := c.gates.CreateRun(ctx, &tollgatev1.CreateRunRequest{RequestId: requestID, Name: name})
	if err != nil {
		return "", false, fmt.Errorf("create run: %w", err)
	}
	return resp.GetRun().GetId(), resp.GetCreated(), nil
}

// Get reads a gate as it stands.
func (c *Client) Get(ctx context.Context, run, name string) (Decision, error) {
	resp, err := c.gates.GetGate(ctx, &tollgatev1.GetGateRequest{RunId: run, Gate: name})
	if err != nil {
		return Decision{}, fmt.Errorf("read gate %s of %s: %w", name, run, err)
	}
	return fromProto(run, resp.GetGate()), nil
}

// Wait blocks until the gate is decided, expired or cancelled, or ctx
// ends. It follows the run's changes (WatchRun) and reads the gate after
// each, and again when the deadline passes (every reader applies it); a
// control plane that restarts or a dropped stream is waited out, so a
// question asked before a restart is still answered after it.
func (c *Client) Wait(ctx context.Context, run, name string, progress func(Decision)) (Decision, error) {
	cursor := ""
	for {
		d, err := c.Get(ctx, run, name)
		if err == nil {
			if d.Outcome != Pending {
				return d, nil
			}
			if progress != nil {
				progress(d)
			}
			cursor, err = c.nextChange(ctx, run, cursor, d)
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return Decision{}, ctx.Err()
		}
		if !transient(err) {
			return Decision{}, err
		}
		if err := sleep(ctx, c.Retry); err != nil {
			return Decision{}, err
		}
	}
}

// nextChange blocks until the run changes after cursor, the gate's
// deadline passes, or a minute goes by; it returns the cursor to resume
// from.
func (c *Client) nextChange(ctx context.Context, run, cursor string, d Decision) (string, error) {
	wait := time.Minute
	if exp := d.Ask.GetExpiresAt(); exp != nil {
		if until := time.Until(exp.AsTime()) + 500*time.Millisecond; until < wait {
			wait = max(until, 100*time.Millisecond)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	stream, err := c.runs.WatchRun(wctx, &tollgatev1.WatchRunRequest{RunId: run, Cursor: cursor})
	if err != nil {
		return cursor, err
	}
	// One event is enough: any change of the run (or the snapshot a
	// fresh watch starts with) sends the caller back to read the gate.
	resp, err := stream.Recv()
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return cursor, nil // the deadline or the minute: read again
		}
		return cursor, err
	}
	return resp.GetEvent().GetCursor(), nil
}

// StepDone reports whether step already succeeded in run, and when.
func (c *Client) StepDone(ctx context.Context, run, step string) (bool, time.Time, error) {
	resp, err := c.runs.GetRun(ctx, &tollgatev1.GetRunRequest{RunId: run})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("read run %s: %w", run, err)
	}
	done, at := StepDoneIn(resp.GetRun(), step)
	return done, at, nil
}

// StepDoneIn reports whether step succeeded in r (as GetRun returned it),
// and when its last attempt finished.
func StepDoneIn(r *tollgatev1.Run, step string) (bool, time.Time) {
	for _, s := range r.GetSteps() {
		if s.GetStepId() == step && s.GetState() == tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED {
			at := s.GetAttempts()
			return true, at[len(at)-1].GetFinishedAt().AsTime()
		}
	}
	return false, time.Time{}
}

// ErrStepDone is returned by RecordStep when the step already succeeded.
var ErrStepDone = errors.New("step already completed")

// RecordStep journals a step the caller ran: exit status, output digest
// ("sha256:<hex>", freshness.ContentDigest) and when it ran.
func (c *Client) RecordStep(ctx context.Context, run, step string, exit int, outputDigest string, started, finished time.Time) error {
	_, err := c.gates.RecordStep(ctx, &tollgatev1.RecordStepRequest{RunId: run, Step: step, ExitStatus: int32(exit), OutputDigest: outputDigest,
		StartedAt: timestamppb.New(started), FinishedAt: timestamppb.New(finished)})
	if status.Code(err) == codes.AlreadyExists {
		return fmt.Errorf("%w: %s", ErrStepDone, status.Convert(err).Message())
	}
	if err != nil {
		return fmt.Errorf("record step %s: %w", step, err)
	}
	return nil
}

// Finish ends the run complete, or failed with a reason.
func (c *Client) Finish(ctx context.Context, run string, failed bool, reason string) (*tollgatev1.Run, error) {
	resp, err := c.gates.FinishRun(ctx, &tollgatev1.FinishRunRequest{RunId: run, Failed: failed, Reason: reason})
	if err != nil {
		return nil, fmt.Errorf("finish run %s: %w", run, err)
	}
	return resp.GetRun(), nil
}

func fromProto(run string, g *tollgatev1.Gate) Decision {
	d := Decision{RunID: run, Gate: g.GetAsk().GetStoppingPointId(), Outcome: outcomes[g.GetOutcome()], Actor: g.GetDecidedBy(),
		Reason: g.GetReason(), Grant: wire.GrantFromProto(g.GetGrant()), Ask: g.GetAsk()}
	if d.Outcome == Approved {
		d.Option = g.GetAsk().GetSelectedOptionId()
	}
	if g.GetDecidedAt() != nil {
		d.At = g.GetDecidedAt().AsTime()
	}
	return d
}

// transient reports whether waiting should go on after err: the control
// plane is unreachable, restarting or busy.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
