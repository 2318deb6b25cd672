package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// devConn is a gRPC connection to a --dev plane as one of its dev users.
func (p *plane) devConn(t *testing.T, user string) *grpc.ClientConn {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(p.home, "dev", "tokens", user+".jwt"))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := identity.DialOptions(p.addr, strings.TrimSpace(string(tok)), identity.Transport{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := grpc.NewClient(p.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Item 7 of issue 13 (I9), with real processes: alice's vendor payment
// parks for finance (a plane on Redis, a real executor hosting the ERP
// and payments stand-ins, the dev policy). mallory, a dev user in no policy
// row, finds nothing of it — not the run, not the ask with
// the bank account, not the journal, not in any list or audit — and
// approvectl says "not found" exactly as for a run that never existed,
// exit 1. The requester, finance (dave may approve it, bob is in the
// audience beyond his limit, carol acts for dave), the auditor and the
// operator see it.
func TestItem7_StrangerFindsNothingOfAlicesPayment(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1")
	p := c.plane
	var run runOut
	p.ctl(t, "", "--as", "alice", "run", "vendor-payment", "-o", "json").json(t, &run)
	run = c.until(run.RunID, "parked", func(r runOut) bool { return r.State == "parked" && len(r.Asks) == 1 })
	askID := run.Asks[0].AskID
	packet := p.ctl(t, "", "--as", "dave", "asks", "show", askID)
	if packet.code != 0 || !strings.Contains(packet.stdout, "XXXX2048") {
		t.Fatalf("dave, who may decide it, reads the packet with the bank account: %d %s %s", packet.code, packet.stdout, packet.stderr)
	}
	secrets := []string{"alice", "485000", "V-1187", "XXXX2048", "bank_account", "finance", "pay "}

	const missing = "r_nosuchrun00"
	for _, who := range []string{"mallory"} {
		// Each refusal reads word for word as for a run never created.
		for _, args := range [][]string{
			{"runs", "show", "RUN"},
			{"asks", "show", "RUN/ask_1"},
			{"approve", "RUN/ask_1"},
			{"reject", "RUN/ask_1", "--reason", "probe"},
			{"runs", "cancel", "RUN"},
			{"audit", "--run", "RUN"},
		} {
			got := p.ctl(t, "", append([]string{"--as", who}, subst(args, run.RunID)...)...)
			want := p.ctl(t, "", append([]string{"--as", who}, subst(args, missing)...)...)
			if got.code != 1 || !strings.Contains(got.stderr, "not found") ||
				strings.ReplaceAll(got.stderr, run.RunID, "RUN") != strings.ReplaceAll(want.stderr, missing, "RUN") || got.stdout != "" {
				t.Errorf("%s %v: exit %d %q %q; want exit 1 and, as for a missing run, %q", who, args, got.code, got.stdout, got.stderr, want.stderr)
			}
			for _, s := range secrets {
				if strings.Contains(got.stderr, s) {
					t.Errorf("%s %v: the refusal echoes %q: %s", who, args, s, got.stderr)
				}
			}
		}
		// Lists and audits leave it out, and count nothing of it.
		for _, args := range [][]string{{"runs", "-o", "json"}, {"asks", "-o", "json"}, {"audit", "-o", "json"}} {
			got := p.ctl(t, "", append([]string{"--as", who}, args...)...)
			if got.code != 0 || strings.Contains(got.stdout, run.RunID) || (args[0] == "audit" && !strings.Contains(got.stdout, `"runs_checked": 0`)) {
				t.Errorf("%s %v: exit %d %s %s; want the payment left out", who, args, got.code, got.stdout, got.stderr)
			}
		}
		// The journal, through the API.
		_, err := tollgatev1.NewAuditServiceClient(p.devConn(t, who)).ListJournal(context.Background(), &tollgatev1.ListJournalRequest{RunId: run.RunID})
		if status.Code(err) != codes.NotFound || strings.Contains(err.Error(), "alice") {
			t.Errorf("%s reading the journal: %v", who, err)
		}
		// Watching it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := tollgatev1.NewRunServiceClient(p.devConn(t, who)).WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: run.RunID})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		if status.Code(err) != codes.NotFound {
			t.Errorf("%s watching it: %v", who, err)
		}
	}

	// Those it is visible to read it.
	for _, who := range []string{"alice", "dave", "bob", "carol", "audrey", "otto"} {
		if got := p.ctl(t, "", "--as", who, "runs", "show", run.RunID); got.code != 0 || !strings.Contains(got.stdout, "pay 485000 INR") {
			t.Errorf("%s runs show: %d %s", who, got.code, got.stderr)
		}
	}
	for _, who := range []string{"audrey", "otto"} {
		if got := p.ctl(t, "", "--as", who, "runs", "-o", "json"); got.code != 0 || !strings.Contains(got.stdout, run.RunID) {
			t.Errorf("%s lists every run: %d %s", who, got.code, got.stderr)
		}
		recs, err := tollgatev1.NewAuditServiceClient(p.devConn(t, who)).ListJournal(context.Background(), &tollgatev1.ListJournalRequest{RunId: run.RunID})
		if err != nil || len(recs.GetRecords()) == 0 {
			t.Errorf("%s reads the journal: %v", who, err)
		}
	}
	if r := p.ctl(t, "", "--as", "audrey", "audit"); r.code != 0 || !strings.Contains(r.stdout, "1 runs checked") {
		t.Fatalf("the auditor's audit covers the run: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// subst puts id where args say RUN.
func subst(args []string, id string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.Replace(a, "RUN", id, 1)
	}
	return out
}
