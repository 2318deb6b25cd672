package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// After an amendment the question reads the amended amount: the inbox and
// the packet never state a payload other than the one approved (issue
// 16: bob's inbox read "pay 485000 INR" after the amount became 90000).
func TestAmendRetitlesTheAsk(t *testing.T) {
	s := vendorPayment(t)
	if a := s.run.Asks["ask_1"]; a.Summary != "two-way match of I-991 against PO-441; see the match notes" {
		t.Fatalf("the ask carries the stopping point's summary: %q", a.Summary)
	}
	s.apply(Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 90000, At: s.tick(time.Second)})
	if got := s.run.Asks["ask_1"].Title; got != "pay 90000 INR to vendor V-1187 for invoice I-991?" {
		t.Fatalf("title after the amendment: %q", got)
	}
	s.apply(Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 1200, At: s.tick(time.Second)})
	if got := s.run.Asks["ask_1"].Title; got != "pay 1200 INR to vendor V-1187 for invoice I-991?" {
		t.Fatalf("title after a second amendment: %q", got)
	}
}

// Only a whole number that the title quotes once is replaced.
func TestRetitle(t *testing.T) {
	for _, tc := range []struct{ title, from, want string }{
		{"pay 485000 INR?", "485000", "pay 9 INR?"},
		{"pay 485000", "485000", "pay 9"},
		{"485000 to V-1?", "485000", "9 to V-1?"},
		{"pay 100 for invoice I-1001?", "100", "pay 9 for invoice I-1001?"},
		{"pay 100 for 100 units?", "100", "pay 100 for 100 units? (amount now 9)"}, // which one is the amount is not known
		{"pay 1.100 or 100.5?", "100", "pay 1.100 or 100.5? (amount now 9)"},
		{"pay the vendor?", "485000", "pay the vendor? (amount now 9)"},
		{"pay the vendor? (amount now 485000)", "485000", "pay the vendor? (amount now 9)"}, // a second amendment
		{"pay the vendor?", "9", "pay the vendor?"},                                         // amended to what it was
		// Another field's amendment is not this one's mention.
		{"pay the vendor? (fee now 485000)", "485000", "pay the vendor? (fee now 485000) (amount now 9)"},
		{"pay 485000 INR? (fee now 485000)", "485000", "pay 9 INR? (fee now 485000)"},
	} {
		if got := retitle(tc.title, "amount", []string{tc.from}, "9"); got != tc.want {
			t.Errorf("retitle(%q, %s → 9) = %q, want %q", tc.title, tc.from, got, tc.want)
		}
	}
}

// A payload digest the ask never bound is not a change since it was read:
// it is refused as a digest that does not match, quoting both. One it
// bound before an amendment is a change.
func TestApproveWithADigestTheAskNeverBound(t *testing.T) {
	s := vendorPayment(t)
	a := s.run.Asks["ask_1"]
	_, err := s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "dave", Option: "1", Judged: JudgedOn(a, "sha256:0000", a.EvidenceDigest(), true), At: s.tick(time.Second)})
	if !errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrStaleAsk) || !strings.Contains(err.Error(), "sha256:0000") ||
		!strings.Contains(err.Error(), a.PayloadDigest()) || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("approve --payload sha256:0000: %v", err)
	}
	old := a.PayloadDigest()
	s.apply(Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 90000, At: s.tick(time.Second)})
	a = s.run.Asks["ask_1"]
	_, err = s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "dave", Option: "1", Judged: JudgedOn(a, old, a.EvidenceDigest(), true), At: s.tick(time.Second)})
	if !errors.Is(err, ErrStaleAsk) {
		t.Fatalf("approving the digest read before the amendment: %v, want ErrStaleAsk", err)
	}
}

// What a `show:` reference shows is the referenced value's canonical JSON,
// whose digest the ask bound; once the step's output is another, it is
// not returned as what was shown.
func TestShownIsWhatTheAskBound(t *testing.T) {
	s := vendorPayment(t)
	a := s.run.Asks["ask_1"]
	b, ok := s.m.Shown(s.run, a.Evidence[1])
	if !ok || string(b) != `{"bank_account":"DE00 2048"}` || a.Evidence[1].Ref != "vendor" || a.Evidence[1].MediaType != ShownMediaType {
		t.Fatalf("shown %s %v: %q", a.Evidence[1].Ref, ok, b)
	}
	s.run.Steps["vendor"].Output = []byte(`{"bank_account":"DE00 7731"}`)
	if b, ok := s.m.Shown(s.run, a.Evidence[1]); ok || b != nil {
		t.Fatalf("an output that is not the one bound was shown: %q", b)
	}
}
