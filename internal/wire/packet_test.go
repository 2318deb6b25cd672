package wire

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
)

// vendorPayment is the vendor-payment skill's run parked at its gate, its
// match notes large enough to be cut.
func vendorPayment(t *testing.T, notes string) (*engine.Machine, *engine.Run) {
	t.Helper()
	m := exampleMachine(t, "vendor-payment")
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	run := m.Start("r1", "alice", t0).Run
	at := t0
	apply := func(ev engine.Event) {
		t.Helper()
		tr, err := m.Apply(run, ev)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		run = tr.Run
	}
	succeed := func(step, out string) {
		t.Helper()
		at = at.Add(time.Second)
		apply(engine.StepLeased{Step: step, Attempt: 1, Executor: "x1", LeaseID: "l-" + step, At: at})
		apply(engine.StepSucceeded{Step: step, Attempt: 1, Output: []byte(out), At: at})
	}
	succeed("vendor", `{"id":"V-1187","bank_account":"XXXX2048"}`)
	succeed("invoice", `{"id":"I-991"}`)
	succeed("po", `{"id":"PO-441"}`)
	succeed("match", notes)
	if run.Asks["ask_1"] == nil {
		t.Fatalf("the gate did not open: %s", run.State)
	}
	at = at.Add(time.Second)
	apply(engine.Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 90000, At: at})
	return m, run
}

// The packet carries the summary and each `show:` reference's content as
// the run holds it, its digest the one the ask bound; content above
// MaxShownContent is cut and says how to read it all, the digest still
// that of the whole; the title and the amendable value read the amended
// amount (issue 16).
func TestAskPacketShowsContentBoundedAndTheAmendedTitle(t *testing.T) {
	big := `"` + strings.Repeat("é match line\n", 10000) + `"` // ~140 KiB, two-byte characters
	big = strings.ReplaceAll(big, "\n", `\n`)
	m, run := vendorPayment(t, big)
	a := run.Asks["ask_1"]

	p := Ask(run, m, a, false)
	if p.GetSummary() != "two-way match of I-991 against PO-441; see the match notes" {
		t.Errorf("summary %q", p.GetSummary())
	}
	if p.GetTitle() != "pay 90000 INR to vendor V-1187 for invoice I-991?" {
		t.Errorf("title after amending the amount to 90000: %q", p.GetTitle())
	}
	if p.GetAmendableValues()["amount"] != "90000" || len(p.GetChanges()) != 1 || p.GetChanges()[0] != "amount 485000 → 90000 by dave" {
		t.Errorf("amendable values %v, changes %q", p.GetAmendableValues(), p.GetChanges())
	}
	if d := p.GetDecisions()[0]; d.GetAmendField() != "amount" || d.GetAmendValueJson() != "90000" || d.GetAmendedPayloadDigest() != p.GetPayloadDigest() || d.GetPayloadDigest() == p.GetPayloadDigest() {
		t.Errorf("the amendment's record: %v", d)
	}
	if len(p.GetLadder()) != 1 || p.GetLadder()[0].GetKind() != "expire" || p.GetLadder()[0].GetTo() != "reject" {
		t.Errorf("ladder %v", p.GetLadder())
	}
	var match, vendor = p.GetEvidence()[0], p.GetEvidence()[1]
	if match.GetRef() != "match" || !match.GetTruncated() || match.GetSize() != int64(len(big)) || len(match.GetContent()) > MaxShownContent ||
		!bytes.HasPrefix([]byte(big), match.GetContent()) || !strings.Contains(match.GetNote(), "truncated at 64 KiB of 146 KiB; full content: approvectl asks show r1/ask_1 --full") {
		t.Errorf("the match notes are cut, and say so: truncated %v size %d len %d note %q", match.GetTruncated(), match.GetSize(), len(match.GetContent()), match.GetNote())
	}
	if match.GetDigest() != freshness.ContentDigest([]byte(big)) || match.GetDigest() != a.Evidence[0].Digest {
		t.Errorf("the digest is of the whole content, as bound: %s", match.GetDigest())
	}
	if string(vendor.GetContent()) != `{"bank_account":"XXXX2048","id":"V-1187"}` || vendor.GetTruncated() || vendor.GetMediaType() != "application/json" ||
		vendor.GetDigest() != freshness.ContentDigest(vendor.GetContent()) {
		t.Errorf("the vendor record, canonical JSON, whole: %q %s", vendor.GetContent(), vendor.GetDigest())
	}
	full := Ask(run, m, a, true).GetEvidence()[0]
	if full.GetTruncated() || string(full.GetContent()) != big {
		t.Errorf("full content: truncated %v, %d bytes", full.GetTruncated(), len(full.GetContent()))
	}
	// The evidence digest covers what was shown: recomputed from the
	// artifacts' refs, names and digests.
	if got := freshness.EvidenceDigest(p.GetEvidence(), func(e *tollgatev1.EvidenceArtifact) (string, string, string) {
		return e.GetRef(), e.GetName(), e.GetDigest()
	}); got != p.GetEvidenceDigest() {
		t.Errorf("evidence digest %s, recomputed %s", p.GetEvidenceDigest(), got)
	}
	// The inbox line reads the amended amount too.
	if s := AskSummary(run, a); s.GetTitle() != p.GetTitle() {
		t.Errorf("inbox title %q", s.GetTitle())
	}
	// A step that ran again no longer shows what was bound: no content.
	run.Steps["match"].Output = []byte(`"other notes"`)
	if e := Ask(run, m, a, false).GetEvidence()[0]; len(e.GetContent()) != 0 || !strings.Contains(e.GetNote(), "no longer held") {
		t.Errorf("content that is not what was bound: %q %q", e.GetContent(), e.GetNote())
	}
}

// Each decision says the payload digest it was made against: one made
// before an amendment quotes the digest the amendment replaced, not the
// ask's digest now (a decision is never shown as binding a payload it
// was not given for).
func TestDecisionsQuoteTheDigestTheyWereMadeAgainst(t *testing.T) {
	m, run := vendorPayment(t, `"ok"`)
	a := *run.Asks["ask_1"]
	amend := a.Decisions[len(a.Decisions)-1]
	if amend.Kind != engine.DecisionAmend || amend.Before == "" || amend.Before == a.PayloadDigest() {
		t.Fatalf("fixture: last decision %+v, digest now %s", amend, a.PayloadDigest())
	}
	early := engine.Decision{Kind: engine.DecisionRequestEvidence, Actor: "bob", At: amend.At.Add(-time.Second), Reason: "the PO"}
	late := engine.Decision{Kind: engine.DecisionRequestEvidence, Actor: "dave", At: amend.At.Add(time.Second), Reason: "the GRN"}
	a.Decisions = append(append(slices.Clone(a.Decisions[:len(a.Decisions)-1]), early, amend), late)
	ds := Ask(run, m, &a, false).GetDecisions()
	n := len(ds)
	if got := ds[n-3].GetPayloadDigest(); got != amend.Before {
		t.Errorf("decision before the amendment quotes %s, want the digest it was made against, %s", got, amend.Before)
	}
	if got := ds[n-2]; got.GetPayloadDigest() != amend.Before || got.GetAmendedPayloadDigest() != a.PayloadDigest() {
		t.Errorf("amendment: %s → %s, want %s → %s", got.GetPayloadDigest(), got.GetAmendedPayloadDigest(), amend.Before, a.PayloadDigest())
	}
	if got := ds[n-1].GetPayloadDigest(); got != a.PayloadDigest() {
		t.Errorf("decision after the amendment quotes %s, want %s", got, a.PayloadDigest())
	}
}

// A large artifact that is not UTF-8 text (a script gate's binary) is cut
// at MaxShownContent, a character's bytes kept whole only where it is
// text: not cut back to nothing.
func TestBinaryArtifactIsCutNotEmptied(t *testing.T) {
	bin := bytes.Repeat([]byte{0x80}, MaxShownContent+10)
	run := &engine.Run{ID: "r1", Requester: "alice"}
	a := &engine.AskRun{ID: "g", Type: engine.Gate, Evidence: []engine.Evidence{{Name: "blob", MediaType: "application/octet-stream", Content: bin, Digest: freshness.ContentDigest(bin)}}}
	got := Ask(run, nil, a, false).GetEvidence()[0]
	if !got.GetTruncated() || len(got.GetContent()) < MaxShownContent-3 || !bytes.Equal(got.GetContent(), bin[:len(got.GetContent())]) {
		t.Fatalf("truncated %v, %d bytes shown of %d", got.GetTruncated(), len(got.GetContent()), len(bin))
	}
	text := []byte(strings.Repeat("é", MaxShownContent)) // 2 bytes each: the cut falls on a boundary or mid-character
	a.Evidence = []engine.Evidence{{Name: "t", MediaType: "text/plain", Content: text[1:], Digest: freshness.ContentDigest(text[1:])}}
	if c := Ask(run, nil, a, false).GetEvidence()[0].GetContent(); len(c) < MaxShownContent-3 || !bytes.Equal(c, text[1:len(c)+1]) {
		t.Fatalf("text: %d bytes shown", len(c))
	}
}
