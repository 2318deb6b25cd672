package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/chaoscheck"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// chaosUsers are the people the workload acts as: alice starts runs and
// cancels them; bob and carol (members, not the requester) decide gates
// and answer in-doubt steps, racing each other.
var chaosUsers = []string{"alice", "bob", "carol", "audrey"}

// markStep is the side-effecting step of every gated run the workload
// starts.
const markStep = "m"

// markName is the side effect a run started with key performs: one
// counter of the test tool per run, so the tool's own log says how many
// times each run's effect happened.
func markName(key string) string { return "mk-" + key }

// chaosAPI is a client's way to every replica, as each user: one
// connection per replica and user, through the clients' fault proxies.
type chaosAPI struct {
	conns map[string][]*grpc.ClientConn // user → one per replica
}

func dialChaos(addrs []string, tokens map[string]string) (*chaosAPI, error) {
	a := &chaosAPI{conns: map[string][]*grpc.ClientConn{}}
	for user, tok := range tokens {
		for _, addr := range addrs {
			c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: tok, Insecure: true}))
			if err != nil {
				a.close()
				return nil, err
			}
			a.conns[user] = append(a.conns[user], c)
		}
	}
	return a, nil
}

func (a *chaosAPI) close() {
	for _, cs := range a.conns {
		for _, c := range cs {
			c.Close()
		}
	}
}

func (a *chaosAPI) runs(user string, replica int) tollgatev1.RunServiceClient {
	return tollgatev1.NewRunServiceClient(a.conns[user][replica])
}

func (a *chaosAPI) asks(user string, replica int) tollgatev1.ApprovalServiceClient {
	return tollgatev1.NewApprovalServiceClient(a.conns[user][replica])
}

func (a *chaosAPI) gates(user string, replica int) tollgatev1.GateServiceClient {
	return tollgatev1.NewGateServiceClient(a.conns[user][replica])
}

func (a *chaosAPI) audit(user string, replica int) tollgatev1.AuditServiceClient {
	return tollgatev1.NewAuditServiceClient(a.conns[user][replica])
}

// outcome is what an error tells a client: Refused only for the answers
// the API documents as "not done"; anything else may have happened.
func outcome(err error) chaoscheck.Outcome {
	if err == nil {
		return chaoscheck.OK
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unauthenticated, codes.ResourceExhausted:
		return chaoscheck.Refused
	}
	return chaoscheck.Unknown
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String() + ": " + s.Message()
	}
	return err.Error()
}

// enumName is a proto enum's value without its prefix, lower case
// (RUN_STATE_COMPLETE → complete).
func enumName(v fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(v.String(), prefix))
}

// history is every operation the clients made, in the order they
// returned; its clock is the suite's, shared by every client.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []chaoscheck.Op
	// runs is every run a client was told of, with the key that started
	// it; keys whose start had no answer are kept to ask again.
	runs    map[string]string
	unknown map[string]bool
	// recipes is what each key started: a retry sends the same.
	recipes map[string]string
	// open is the runs the last read of showed an open ask; gates the
	// runs of gates from code.
	open  map[string]bool
	gates map[string]bool
}

func newHistory() *history {
	return &history{start: time.Now(), runs: map[string]string{}, unknown: map[string]bool{}, recipes: map[string]string{}, open: map[string]bool{}, gates: map[string]bool{}}
}

func (h *history) now() time.Duration { return time.Since(h.start) }

func (h *history) add(o chaoscheck.Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, o)
	if o.Kind == chaoscheck.Read && o.Outcome == chaoscheck.OK {
		delete(h.open, o.Run)
		for _, st := range o.Asks {
			if st == "pending" || st == "in_doubt" {
				h.open[o.Run] = true
			}
		}
	}
	if o.Kind == chaoscheck.Start && o.Outcome == chaoscheck.OK {
		h.open[o.Run] = true // most runs start with a gate
		if strings.HasPrefix(o.Key, gatePrefix) {
			h.gates[o.Run] = true
		}
	}
	if o.Kind == chaoscheck.Start {
		switch {
		case o.Outcome == chaoscheck.OK:
			h.runs[o.Run] = o.Key
			delete(h.unknown, o.Key)
		case o.Outcome == chaoscheck.Unknown:
			h.unknown[o.Key] = true
		default:
			delete(h.unknown, o.Key) // refused: asked again, it is refused again
		}
	}
}

// pick returns a random known run.
func (h *history) pick(rng *rand.Rand) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return pickKey(rng, h.runs)
}

// pickGate returns a random run of a gate from code.
func (h *history) pickGate(rng *rand.Rand) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return pickKey(rng, h.gates)
}

// pickOpen returns a random run last seen with an open ask (or any run).
func (h *history) pickOpen(rng *rand.Rand) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.open) == 0 {
		return pickKey(rng, h.runs)
	}
	return pickKey(rng, h.open)
}

// pickKey returns a random key of m ("" when empty). Map order is not
// the seed's: the choice among keys is.
func pickKey[V any](rng *rand.Rand, m map[string]V) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[rng.IntN(len(keys))]
}

func (h *history) snapshot() ([]chaoscheck.Op, map[string]string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	runs := make(map[string]string, len(h.runs))
	for k, v := range h.runs {
		runs[k] = v
	}
	var unknown []string
	for k := range h.unknown {
		unknown = append(unknown, k)
	}
	return append([]chaoscheck.Op(nil), h.ops...), runs, unknown
}

// chaosClient is one client of the workload: its own seeded choices, any
// replica for each operation.
type chaosClient struct {
	id       int
	rng      *rand.Rand
	api      *chaosAPI
	h        *history
	replicas int
	n        int
}

// opTimeout bounds every call: a call that gets no answer in time is
// Unknown, as a client that gives up would record it.
const opTimeout = 5 * time.Second

// gatedRecipe is a gate a member decides, then a side effect it governs,
// held a random while so faults land mid-call. A gate with expires > 0
// expires that many seconds after it opens (the run is cancelled), racing
// the decisions.
func gatedRecipe(key string, holdMs, expires int) string {
	deadline := ""
	if expires > 0 {
		deadline = fmt.Sprintf("  expires: %ds\n  on expiry: cancel\n", expires)
	}
	return fmt.Sprintf("ask member:\n  mark %s?\n%s%s: test.mark {\"name\": %q, \"hold_ms\": %d}\n", key, deadline, markStep, markName(key), holdMs)
}

// fanRecipe is a read-only fan with a failing branch: two of three must
// succeed, and do. Its first branch sleeps ms: long enough, often, to be
// in flight when a replica stops and another takes its leases over.
func fanRecipe(ms int) string {
	return fmt.Sprintf("together probes:\n  a: test.sleep {\"ms\": %d}\n  b: test.fail {\"message\": \"chaos\"}\n  c: test.sleep {\"ms\": 10}\nthen:\n  need: 2 of 3\n  s: test.sleep {\"ms\": 1}\n", ms)
}

// step performs one random operation.
func (c *chaosClient) step(ctx context.Context) {
	switch p := c.rng.IntN(100); {
	case p < 26:
		c.n++
		key := fmt.Sprintf("c%d-%d", c.id, c.n)
		expires := 0
		if c.rng.IntN(4) == 0 {
			expires = 2 + c.rng.IntN(6)
		}
		hold := c.rng.IntN(400)
		if c.rng.IntN(10) < 3 {
			hold = 500 + c.rng.IntN(2500) // long enough to be in flight when a fault lands
		}
		c.start(ctx, key, gatedRecipe(key, hold, expires))
	case p < 32:
		c.n++
		c.start(ctx, fmt.Sprintf("c%d-%d", c.id, c.n), fanRecipe(20+c.rng.IntN(1500)))
	case p < 38:
		c.n++
		c.start(ctx, fmt.Sprintf("%sc%d-%d", gatePrefix, c.id, c.n), "")
	case p < 72:
		if run := c.h.pickOpen(c.rng); run != "" {
			c.decide(ctx, run)
		}
	case p < 86:
		if run := c.h.pick(c.rng); run != "" {
			c.read(ctx, run, c.rng.IntN(c.replicas))
		}
	case p < 90:
		if run := c.h.pick(c.rng); run != "" {
			c.cancel(ctx, run)
		}
	case p < 95:
		if run := c.h.pickGate(c.rng); run != "" {
			c.finish(ctx, run)
		}
	default:
		c.retryUnknown(ctx)
	}
}

func (c *chaosClient) start(ctx context.Context, key, recipe string) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	c.h.mu.Lock()
	c.h.recipes[key] = recipe
	c.h.mu.Unlock()
	op := chaoscheck.Op{Client: c.id, Kind: chaoscheck.Start, Key: key, Call: c.h.now()}
	replica := c.rng.IntN(c.replicas)
	if strings.HasPrefix(key, gatePrefix) {
		// A gate from code: a script's external run, parked on a gate
		// reviewers decide; the script finishes it once approved.
		res, err := c.api.gates("alice", replica).OpenGate(ctx, &tollgatev1.OpenGateRequest{RequestId: key, RunName: "chaos " + key,
			Gate: chaosGate, Summary: "chaos " + key, PayloadJson: fmt.Sprintf(`{"key": %q}`, key)})
		op.Return, op.Outcome, op.Err = c.h.now(), outcome(err), errText(err)
		op.Run = res.GetRunId()
		c.h.add(op)
		return
	}
	res, err := c.api.runs("alice", replica).StartRun(ctx, &tollgatev1.StartRunRequest{
		RequestId: key, Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}, Name: "chaos " + key})
	op.Return, op.Outcome, op.Err = c.h.now(), outcome(err), errText(err)
	if err == nil {
		op.Run = res.GetRun().GetId()
	}
	c.h.add(op)
}

// gatePrefix starts the key of a gate from code (OpenGate), chaosGate is
// its name: reviewers decide it (gate.* in the example policy), never its
// requester.
const (
	gatePrefix = "g-"
	chaosGate  = "chaos"
)

// finish is the script of a gate from code: once its gate is approved
// (with a grant), it finishes the run complete.
func (c *chaosClient) finish(ctx context.Context, run string) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	replica := c.rng.IntN(c.replicas)
	g, err := c.api.gates("alice", replica).GetGate(ctx, &tollgatev1.GetGateRequest{RunId: run, Gate: chaosGate})
	if err != nil || g.GetGate().GetOutcome() != tollgatev1.GateOutcome_GATE_OUTCOME_APPROVED || g.GetGate().GetGrant() == nil ||
		g.GetGate().GetRunState() != tollgatev1.RunState_RUN_STATE_RUNNING {
		return
	}
	op := chaoscheck.Op{Client: c.id, Kind: chaoscheck.Finish, Run: run, Call: c.h.now()}
	_, err = c.api.gates("alice", replica).FinishRun(ctx, &tollgatev1.FinishRunRequest{RunId: run})
	op.Return, op.Outcome, op.Err = c.h.now(), outcome(err), errText(err)
	c.h.add(op)
}

// retryUnknown starts again, with the same key and recipe, a run whose
// start had no answer: the key makes it the same run (or the first).
func (c *chaosClient) retryUnknown(ctx context.Context) {
	_, _, unknown := c.h.snapshot()
	for _, key := range unknown {
		if strings.HasPrefix(key, fmt.Sprintf("c%d-", c.id)) {
			c.start(ctx, key, c.recipeOf(key))
			return
		}
	}
}

// recipeOf is the recipe a key started with.
func (c *chaosClient) recipeOf(key string) string {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	return c.h.recipes[key]
}

// decide reads a run, picks an open ask, and decides it as bob or carol
// (half the time both at once, each through another replica): a gate
// approved (mostly) or rejected, an in-doubt step retried, said to have
// run, or stopped. Each decision is recorded as its own operation.
func (c *chaosClient) decide(ctx context.Context, run string) {
	view := c.read(ctx, run, c.rng.IntN(c.replicas))
	var open []*tollgatev1.AskSummary
	for _, a := range view.GetAsks() {
		if a.GetState() == tollgatev1.AskState_ASK_STATE_PENDING || a.GetState() == tollgatev1.AskState_ASK_STATE_IN_DOUBT {
			open = append(open, a)
		}
	}
	if len(open) == 0 {
		return
	}
	a := open[c.rng.IntN(len(open))]
	first := c.rng.IntN(c.replicas)
	type choice struct {
		client       int
		who, verdict string
		replica      int
	}
	choose := func(client int, who string, replica int) choice {
		v := "approve"
		switch {
		case a.GetState() == tollgatev1.AskState_ASK_STATE_IN_DOUBT:
			v = []string{"retry", "retry", "it ran", "stop"}[c.rng.IntN(4)]
		case c.rng.IntN(100) >= 85:
			v = "reject"
		}
		return choice{client, who, v, replica}
	}
	people := []string{"bob", "carol"}
	i := c.rng.IntN(2)
	choices := []choice{choose(c.id, people[i], first)}
	if c.rng.IntN(2) == 0 {
		choices = append(choices, choose(c.id+100, people[1-i], (first+1)%c.replicas))
	}
	var wg sync.WaitGroup
	for _, ch := range choices {
		wg.Go(func() { c.decideAs(ctx, a, ch.client, ch.who, ch.verdict, ch.replica) })
	}
	wg.Wait()
}

// decideAs reads ask a as who (for the digest the decision binds) and
// decides it with verdict through replica.
func (c *chaosClient) decideAs(ctx context.Context, a *tollgatev1.AskSummary, client int, who, verdict string, replica int) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	got, err := c.api.asks(who, replica).GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: a.GetId()})
	if err != nil {
		return
	}
	op := chaoscheck.Op{Client: client, Ask: a.GetId(), Who: who, Run: a.GetRunId(), Verdict: verdict}
	if a.GetState() == tollgatev1.AskState_ASK_STATE_IN_DOUBT {
		op.Kind = chaoscheck.Answer
		op.Call = c.h.now()
		_, err = c.api.asks(who, replica).Answer(ctx, &tollgatev1.AnswerRequest{AskId: a.GetId(), Text: verdict,
			ExpectedPayloadDigest: got.GetAsk().GetPayloadDigest()})
	} else {
		op.Kind = chaoscheck.Decide
		req := &tollgatev1.DecideRequest{AskId: a.GetId(), ExpectedPayloadDigest: got.GetAsk().GetPayloadDigest()}
		if verdict == "approve" {
			req.Decision = &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}
		} else {
			req.Decision = &tollgatev1.DecideRequest_Reject{Reject: &tollgatev1.Reject{Reason: "chaos says no"}}
		}
		op.Call = c.h.now()
		_, err = c.api.asks(who, replica).Decide(ctx, req)
	}
	op.Return, op.Outcome, op.Err = c.h.now(), outcome(err), errText(err)
	c.h.add(op)
}

// read reads a run and records what it showed of each ask.
func (c *chaosClient) read(ctx context.Context, run string, replica int) *tollgatev1.Run {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	op := chaoscheck.Op{Client: c.id, Kind: chaoscheck.Read, Run: run, Call: c.h.now()}
	res, err := c.api.runs("alice", replica).GetRun(ctx, &tollgatev1.GetRunRequest{RunId: run})
	op.Return, op.Outcome, op.Err = c.h.now(), outcome(err), errText(err)
	if err == nil {
		op.Asks = map[string]string{}
		for _, a := range res.GetRun().GetAsks() {
			op.Asks[a.GetId()] = enumName(a.GetState(), "ASK_STATE_")
		}
	}
	c.h.add(op)
	return res.GetRun()
}

func (c *chaosClient) cancel(ctx context.Context, run string) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	op := chaoscheck.Op{Client: c.id, Kind: chaoscheck.Cancel, Run: run, Call: c.h.now()}
	_, err := c.api.runs("alice", c.rng.IntN(c.replicas)).CancelRun(ctx, &tollgatev1.CancelRunRequest{RunId: run, Reason: "chaos"})
	op.Return, op.Outcome, op.Err = c.h.now(), outcome(err), errText(err)
	c.h.add(op)
}

// final reads, through replica, everything the checker judges: every run
// alice started (listed, and every run a client heard of), its asks and
// who may decide them, its journal.
func readFinal(ctx context.Context, api *chaosAPI, replica int, known map[string]string) (map[string]chaoscheck.RunFinal, error) {
	ids := map[string]string{}
	for id, key := range known {
		ids[id] = key
	}
	token := ""
	for {
		res, err := api.runs("alice", replica).ListRuns(ctx, &tollgatev1.ListRunsRequest{Requester: "alice", PageSize: 500, PageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, r := range res.GetRuns() {
			if _, ok := ids[r.GetId()]; !ok {
				ids[r.GetId()] = ""
			}
		}
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	out := map[string]chaoscheck.RunFinal{}
	for id := range ids {
		f, err := readRunFinal(ctx, api, replica, id)
		if err != nil {
			return nil, err
		}
		out[id] = f
	}
	return out, nil
}

func readRunFinal(ctx context.Context, api *chaosAPI, replica int, id string) (chaoscheck.RunFinal, error) {
	f := chaoscheck.RunFinal{ID: id}
	res, err := api.runs("alice", replica).GetRun(ctx, &tollgatev1.GetRunRequest{RunId: id})
	if status.Code(err) == codes.NotFound {
		f.Missing = true
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("run %s: %w", id, err)
	}
	r := res.GetRun()
	f.State = enumName(r.GetState(), "RUN_STATE_")
	if strings.Contains(r.GetPlanCard(), "test.mark") {
		f.Mark, f.MarkStep = markName(r.GetRequestId()), markStep
	}
	for _, a := range r.GetAsks() {
		af := chaoscheck.AskFinal{ID: a.GetId(), State: enumName(a.GetState(), "ASK_STATE_")}
		if a.GetState() == tollgatev1.AskState_ASK_STATE_PENDING || a.GetState() == tollgatev1.AskState_ASK_STATE_IN_DOUBT {
			for _, who := range []string{"bob", "carol", "alice"} {
				g, err := api.asks(who, replica).GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: a.GetId()})
				if c := status.Code(err); c == codes.NotFound || c == codes.PermissionDenied {
					continue // not theirs to see, so not theirs to decide
				}
				if err != nil {
					return f, fmt.Errorf("ask %s as %s: %w", a.GetId(), who, err)
				}
				if g.GetMayDecide() {
					af.Deciders++
				}
			}
		}
		f.Asks = append(f.Asks, af)
	}
	page := ""
	for {
		j, err := api.audit("audrey", replica).ListJournal(ctx, &tollgatev1.ListJournalRequest{RunId: id, PageSize: 500, PageToken: page})
		if err != nil {
			return f, fmt.Errorf("journal of %s: %w", id, err)
		}
		for _, rec := range j.GetRecords() {
			p := map[string]any{}
			if err := json.Unmarshal([]byte(rec.GetPayloadJson()), &p); err != nil && rec.GetPayloadJson() != "" {
				return f, fmt.Errorf("journal of %s, seq %d: %w", id, rec.GetSeq(), err)
			}
			f.Journal = append(f.Journal, chaoscheck.Record{Seq: rec.GetSeq(), Kind: rec.GetKind(), Actor: rec.GetActor(), Payload: p})
		}
		if page = j.GetNextPageToken(); page == "" {
			break
		}
	}
	return f, nil
}
