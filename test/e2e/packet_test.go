package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// packetOut is what `asks show -o json` prints that this test reads.
type packetOut struct {
	AskID          string `json:"ask_id"`
	Title          string `json:"title"`
	Summary        string `json:"summary"`
	PayloadDigest  string `json:"payload_digest"`
	EvidenceDigest string `json:"evidence_digest"`
	Evidence       []struct {
		Ref       string `json:"ref"`
		Name      string `json:"name"`
		MediaType string `json:"media_type"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
		Truncated bool   `json:"truncated"`
		Content   string `json:"content"`
		Base64    string `json:"content_base64"`
	} `json:"evidence"`
	Actions []struct {
		Args json.RawMessage `json:"args"`
	} `json:"actions"`
	Amendable []struct {
		Field string `json:"field"`
		Now   string `json:"value_now"`
	} `json:"amendable"`
	Changes   []string `json:"changes"`
	Authority *struct {
		Description string `json:"description"`
	} `json:"authority"`
	Ladder []struct {
		Kind string `json:"kind"`
	} `json:"ladder"`
}

// showPacket runs `asks show` as who, in text and as JSON, and checks
// that what the approver is shown is exactly what the evidence digest
// covers: each artifact's digest recomputed from its content as printed,
// and the evidence digest from those, by the formula `asks show --help`
// documents.
func showPacket(t *testing.T, p *plane, who, ask string) (string, packetOut) {
	t.Helper()
	text := p.ctl(t, "", "--as", who, "asks", "show", ask)
	if text.code != 0 {
		t.Fatalf("asks show %s: %d %s", ask, text.code, text.stderr)
	}
	var pk packetOut
	p.ctl(t, "", "--as", who, "asks", "show", ask, "-o", "json").json(t, &pk)
	var lines strings.Builder
	for _, e := range pk.Evidence {
		content := []byte(e.Content)
		if e.Base64 != "" {
			var err error
			if content, err = base64.StdEncoding.DecodeString(e.Base64); err != nil {
				t.Fatal(err)
			}
		}
		sum := sha256.Sum256(content)
		if e.Truncated || int64(len(content)) != e.Size || "sha256:"+hex.EncodeToString(sum[:]) != e.Digest {
			t.Errorf("%s: artifact %q|%q: the digest %s is not that of the content shown (%d of %d bytes, truncated %v)", ask, e.Ref, e.Name, e.Digest, len(content), e.Size, e.Truncated)
		}
		lines.WriteString(e.Ref + "|" + e.Name + "=" + e.Digest + "\n")
	}
	sum := sha256.Sum256([]byte(lines.String()))
	if len(pk.Evidence) > 0 && "sha256:"+hex.EncodeToString(sum[:]) != pk.EvidenceDigest {
		t.Errorf("%s: evidence digest %s, recomputed from what was shown %s", ask, pk.EvidenceDigest, "sha256:"+hex.EncodeToString(sum[:]))
	}
	return text.stdout, pk
}

// pendingAsk waits for run to park at a pending ask and returns it.
func pendingAsk(t *testing.T, p *plane, who, run, after string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r runOut
		p.ctl(t, "", "--as", who, "runs", "show", run, "-o", "json").json(t, &r)
		for _, a := range r.Asks {
			if a.State == "pending" && a.AskID != after && r.State == "parked" {
				return a.AskID
			}
		}
		// blocked: the dev executor is still connecting.
		if r.State != "running" && r.State != "parked" && r.State != "blocked" || time.Now().After(deadline) {
			t.Fatalf("run %s never parked at a new ask (after %q): %+v", run, after, r)
		}
		<-time.After(50 * time.Millisecond)
	}
}

// The decision packet, shown whole (issue 16): pr-review's approver reads
// the claims it approves and the ask's summary; a script gate's approver
// reads its artifact; after an amendment the inbox and the packet read
// the amended amount; and in each, the evidence digest recomputed from
// what `asks show -o json` printed is the ask's.
func TestDecisionPacketShownWhole(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")

	t.Run("pr-review", func(t *testing.T) {
		var run runOut
		p.ctl(t, "", "--as", "alice", "run", "pr-review", "-o", "json").json(t, &run)
		ask := pendingAsk(t, p, "alice", run.RunID, "")
		text, pk := showPacket(t, p, "alice", ask)
		if len(pk.Evidence) != 1 || pk.Evidence[0].Ref != "claims" || pk.Evidence[0].Content == "" || pk.EvidenceDigest == "" {
			t.Fatalf("the claims gate shows the claims: %+v", pk)
		}
		var claims string
		if err := json.Unmarshal([]byte(pk.Evidence[0].Content), &claims); err != nil {
			claims = pk.Evidence[0].Content
		}
		first, _, _ := strings.Cut(strings.TrimSpace(claims), "\n")
		if !strings.Contains(text, first) || !strings.Contains(text, "{claims}") {
			t.Fatalf("asks show lacks the claims (%q):\n%s", first, text)
		}
		// On to the fix plan, whose ask has a summary.
		for i := 0; i < 2; i++ {
			if r := p.ctl(t, "", "--as", "alice", "approve", ask); r.code != 0 {
				t.Fatalf("approve %s: %d %s", ask, r.code, r.stderr)
			}
			ask = pendingAsk(t, p, "alice", run.RunID, ask)
		}
		text, pk = showPacket(t, p, "alice", ask)
		if pk.Summary != "fix clusters and waves for PR 4182" || !strings.Contains(text, "summary: fix clusters and waves for PR 4182") {
			t.Fatalf("the fix plan's summary: %q\n%s", pk.Summary, text)
		}
		if len(pk.Evidence) != 1 || pk.Evidence[0].Ref != "plan" || pk.Evidence[0].Content == "" || len(pk.Ladder) == 0 {
			t.Fatalf("the fix plan gate shows the plan and its deadline: %+v", pk)
		}
	})

	t.Run("script gate", func(t *testing.T) {
		claims := "claim 1: the report says X\nclaim 2: the totals add up\n"
		file := filepath.Join(t.TempDir(), "claims.txt")
		if err := os.WriteFile(file, []byte(claims), 0o644); err != nil {
			t.Fatal(err)
		}
		res := p.ctl(t, "", "--as", "alice", "gate", "claims", "--summary", "Are these the claims to check?", "--artifact", file, "--no-wait", "-o", "json")
		var g struct {
			RunID string `json:"run_id"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &g); err != nil || g.RunID == "" {
			t.Fatalf("gate: %d %s %s", res.code, res.stdout, res.stderr)
		}
		text, pk := showPacket(t, p, "bob", g.RunID+"/claims")
		if len(pk.Evidence) != 1 || pk.Evidence[0].Name != "claims.txt" || pk.Evidence[0].Content != claims || pk.Evidence[0].MediaType != "text/plain; charset=utf-8" && pk.Evidence[0].MediaType != "text/plain" {
			t.Fatalf("bob reads the claims file: %+v", pk.Evidence)
		}
		for _, want := range []string{"Are these the claims to check?", "claims.txt (text/plain", "claim 1: the report says X", "claim 2: the totals add up"} {
			if !strings.Contains(text, want) {
				t.Errorf("asks show lacks %q:\n%s", want, text)
			}
		}
	})

	t.Run("amended", func(t *testing.T) {
		var run runOut
		p.ctl(t, "", "--as", "alice", "run", "vendor-payment", "-o", "json").json(t, &run)
		ask := pendingAsk(t, p, "alice", run.RunID, "")
		if r := p.ctl(t, "", "--as", "dave", "amend", ask, "amount", "90000"); r.code != 0 {
			t.Fatalf("amend: %d %s", r.code, r.stderr)
		}
		const title = "pay 90000 INR to vendor V-1187 for invoice I-991?"
		var inbox struct {
			Asks []struct {
				AskID string `json:"ask_id"`
				Title string `json:"title"`
			} `json:"asks"`
		}
		p.ctl(t, "", "--as", "bob", "asks", "-o", "json").json(t, &inbox)
		found := false
		for _, a := range inbox.Asks {
			if a.AskID == ask {
				found = true
				if a.Title != title {
					t.Errorf("bob's inbox reads %q, want %q", a.Title, title)
				}
			}
		}
		if !found {
			t.Errorf("bob (up to 100000) may decide the amended ask; his inbox: %+v", inbox)
		}
		if r := p.ctl(t, "", "--as", "bob", "asks"); !strings.Contains(r.stdout, title) || strings.Contains(r.stdout, "485000") {
			t.Errorf("bob's inbox:\n%s", r.stdout)
		}
		text, pk := showPacket(t, p, "bob", ask)
		var args struct{ Amount json.Number }
		if len(pk.Actions) != 1 || json.Unmarshal(pk.Actions[0].Args, &args) != nil || args.Amount != "90000" {
			t.Errorf("the action pays the amended amount: %+v", pk.Actions)
		}
		if pk.Title != title || !strings.Contains(text, title) || !strings.Contains(text, "changed: amount 485000 → 90000 by dave") ||
			!strings.Contains(text, "now 90000") {
			t.Errorf("the packet reads the amended amount: %+v\n%s", pk, text)
		}
		if pk.Summary == "" || len(pk.Evidence) != 2 || pk.Evidence[0].Ref != "match" || pk.Evidence[1].Ref != "vendor" ||
			!strings.Contains(pk.Evidence[1].Content, "V-1187") || pk.Authority == nil || pk.Authority.Description == "" {
			t.Errorf("the packet shows the match notes, the vendor and who may decide: %+v", pk)
		}
		if len(pk.Amendable) != 1 || pk.Amendable[0].Now != "90000" || len(pk.Changes) != 1 {
			t.Errorf("amendable now and what changed: %+v %q", pk.Amendable, pk.Changes)
		}
		// A digest that is not the ask's is said to be so, not a change.
		r := p.ctl(t, "", "--as", "bob", "approve", ask, "--payload", "sha256:0000")
		if r.code != 1 || !strings.Contains(r.stderr, "does not match the ask's") || !strings.Contains(r.stderr, pk.PayloadDigest) || strings.Contains(r.stderr, "changed") {
			t.Errorf("approve --payload sha256:0000: %d %s", r.code, r.stderr)
		}
	})
}
