package approvals

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// windowStart and windowEnd bound dave's delegation from bob.
var (
	windowStart = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	windowEnd   = time.Date(2026, 9, 15, 0, 0, 0, 0, time.UTC)
)

const inboxPolicy = `p, role:finance, acme, payments.pay, 100000
p, role:controller, acme, payments.pay, unlimited
p2, acme, payments.pay, 1, requester+agent_owner, INR
p, role:reviewer, acme, gate.*, -
p2, acme, gate.*, 1, requester, -
g, bob, role:finance, acme, _, _
g, carol, role:controller, acme, _, _
g, erin, role:reviewer, acme, _, _
g, bob, role:reviewer, acme, _, _
g, dave, bob, acme, 2026-09-01T00:00:00Z, 2026-09-15T00:00:00Z
`

// counted is the policy with a count of the questions each way.
type counted struct {
	Policy
	fresh, kept atomic.Int64
}

func (c *counted) Authorize(ctx context.Context, req authz.Request) (authz.Decision, error) {
	c.fresh.Add(1)
	return c.Policy.Authorize(ctx, req)
}

func (c *counted) AuthorizeCached(ctx context.Context, req authz.Request) (authz.Decision, error) {
	c.kept.Add(1)
	return c.Policy.AuthorizeCached(ctx, req)
}

type inbox struct {
	desk *Desk
	az   *authz.Authorizer
	pol  *counted
	path string
	now  atomic.Int64
}

func newInbox(t testing.TB) *inbox {
	t.Helper()
	in := &inbox{path: filepath.Join(t.TempDir(), "policy.csv")}
	in.set(time.Date(2026, 9, 5, 12, 0, 0, 0, time.UTC))
	in.write(t, inboxPolicy)
	az, err := authz.New(authz.Config{PolicyPath: in.path, Now: func() time.Time { return time.Unix(0, in.now.Load()).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	in.az, in.pol = az, &counted{Policy: az}
	in.desk = New(Config{Policy: in.pol, Domain: "acme"})
	return in
}

func (in *inbox) set(t time.Time) { in.now.Store(t.UnixNano()) }

func (in *inbox) write(t testing.TB, pol string) {
	t.Helper()
	if err := os.WriteFile(in.path, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
}

// payRun is a run of requester's with a pending `ask finance` over a
// payment of amount INR.
func payRun(id, requester string, amount int64) (*engine.Run, *engine.AskRun) {
	args := plan.Object(fmt.Sprintf(`{"vendor":"V-1","invoice":"I-1","amount":%d,"currency":"INR","bank_account":"X"}`, amount))
	a := &engine.AskRun{ID: "ask_1", Type: plan.StopMenu, Audience: "finance", State: engine.AskPending,
		Payload: []engine.Payload{{Step: "pay", Server: "payments", Tool: "pay", Args: args}}}
	return &engine.Run{ID: id, Requester: requester, Asks: map[string]*engine.AskRun{"ask_1": a}}, a
}

// An inbox page: MayDecide answers every row as Authorize does, and from
// the answers policy keeps — rows of other runs, requesters and amounts
// within one band share an answer — while a decision (Authorize) is
// judged afresh every time.
func TestMayDecideAnswersAsAuthorize(t *testing.T) {
	in := newInbox(t)
	ctx := context.Background()
	var page []*engine.Run
	for i := range 50 {
		run, _ := payRun(fmt.Sprintf("r%02d", i), []string{"alice", "erin", "frank"}[i%3], int64(1000*(i%7))+[]int64{0, 99000, 100001}[i%3])
		page = append(page, run)
	}
	for _, who := range []string{"bob", "carol", "dave", "mallory", "alice"} {
		for _, run := range page {
			a := run.Asks["ask_1"]
			v, err := in.desk.MayDecide(ctx, who, run, a)
			fresh, ferr := in.desk.Authorize(ctx, who, run, a, Approve)
			if !reflect.DeepEqual(v, fresh) || fmt.Sprint(err) != fmt.Sprint(ferr) {
				t.Fatalf("%s on %s: MayDecide %+v (%v), Authorize %+v (%v)", who, run.ID, v, err, fresh, ferr)
			}
		}
	}
	if got := in.pol.kept.Load(); got != 250 {
		t.Errorf("MayDecide asked policy's kept answers %d times, want 250", got)
	}
	if got := in.pol.fresh.Load(); got != 250 {
		t.Errorf("Authorize asked policy afresh %d times, want 250 (every decision judged afresh)", got)
	}
}

// A reload changes MayDecide's answer at once: no kept yes outlives the
// role it came from, nor the policy version it was judged by.
func TestMayDecideSeesAReloadAtOnce(t *testing.T) {
	in := newInbox(t)
	ctx := context.Background()
	run, a := payRun("r1", "alice", 5000)
	if v, err := in.desk.MayDecide(ctx, "bob", run, a); err != nil || !v.OK {
		t.Fatalf("before: %+v %v", v, err)
	}
	in.write(t, strings.Replace(inboxPolicy, "g, bob, role:finance, acme, _, _\n", "", 1))
	if err := in.az.Reload(); err != nil {
		t.Fatal(err)
	}
	v, err := in.desk.MayDecide(ctx, "bob", run, a)
	if err != nil || v.OK || v.Policy != in.az.Version() {
		t.Fatalf("after bob lost finance: %+v %v", v, err)
	}
}

// A delegation window that ends is honoured by MayDecide at the instant
// it ends, whatever it answered a moment before.
func TestMayDecideHonoursAWindowThatEnds(t *testing.T) {
	in := newInbox(t)
	ctx := context.Background()
	run, a := payRun("r1", "alice", 5000)
	for _, step := range []struct {
		at time.Time
		ok bool
	}{{windowStart.Add(-time.Nanosecond), false}, {windowStart, true}, {windowEnd.Add(-time.Nanosecond), true}, {windowEnd, false}} {
		in.set(step.at)
		for range 2 {
			v, err := in.desk.MayDecide(ctx, "dave", run, a)
			if err != nil || v.OK != step.ok || (v.OK && !v.Delegated) {
				t.Fatalf("at %s: dave %+v %v, want ok=%v", step.at, v, err, step.ok)
			}
		}
	}
}

// Two amounts in different bands (a role's limit between them) never
// share an answer: bob may decide 100000, not 100001, whichever is asked
// first.
func TestMayDecideNeverSharesAcrossBands(t *testing.T) {
	for _, order := range [][2]int64{{100000, 100001}, {100001, 100000}} {
		in := newInbox(t)
		for _, amount := range order {
			run, a := payRun(fmt.Sprint("r", amount), "alice", amount)
			v, err := in.desk.MayDecide(context.Background(), "bob", run, a)
			if err != nil || v.OK != (amount <= 100000) || !strings.Contains(v.Why, fmt.Sprint(amount)) {
				t.Fatalf("order %v: bob on %d: %+v %v", order, amount, v, err)
			}
		}
	}
}

// A gate from code keeps its requester out, and anyone acting for her,
// in MayDecide as in Authorize.
func TestMayDecideGateRequester(t *testing.T) {
	in := newInbox(t)
	a := &engine.AskRun{ID: "g", Type: engine.Gate, State: engine.AskPending, Audience: "reviewer",
		Payload: []engine.Payload{{Step: "g", Server: "gate", Tool: "g", Args: plan.Object(`{}`)}}}
	run := &engine.Run{ID: "r", Requester: "bob", External: true, Asks: map[string]*engine.AskRun{"g": a}}
	for who, want := range map[string]bool{"bob": false, "dave": false, "erin": true} {
		for range 2 {
			v, err := in.desk.MayDecide(context.Background(), who, run, a)
			if err != nil || v.OK != want {
				t.Errorf("%s on bob's gate: %+v %v, want ok=%v", who, v, err, want)
			}
		}
	}
}

// BenchmarkInboxPage is the policy work of one inbox page: MayDecide for
// one person on 50 runs of three requesters with amounts in three bands
// (kept: from the answers policy keeps, as the inbox asks now), against
// the same page judged afresh (Authorize: as the inbox asked before).
func BenchmarkInboxPage(b *testing.B) {
	for _, c := range []struct {
		name string
		kept bool
	}{{"fresh", false}, {"kept", true}} {
		b.Run(c.name, func(b *testing.B) {
			in := newInbox(b)
			var page []*engine.Run
			for i := range 50 {
				run, _ := payRun(fmt.Sprintf("r%02d", i), []string{"alice", "erin", "frank"}[i%3], int64(1000*(i%7))+[]int64{0, 99000, 100001}[i%3])
				page = append(page, run)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				for _, run := range page {
					a := run.Asks["ask_1"]
					var err error
					if c.kept {
						_, err = in.desk.MayDecide(ctx, "carol", run, a)
					} else {
						_, err = in.desk.Authorize(ctx, "carol", run, a, Approve)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
