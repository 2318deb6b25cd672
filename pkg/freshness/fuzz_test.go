package freshness_test

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// The formulas as they were written at each site before this package, kept
// here as the reference the fuzzers hold the new code to.

func oldHex(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }

func oldPayloads(ps []payload) string {
	switch len(ps) {
	case 0:
		return ""
	case 1:
		return ps[0].digest
	}
	h := sha256.New()
	for _, p := range ps {
		h.Write([]byte(p.step + "=" + p.digest + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func oldEvidence(es []evidence) string {
	if len(es) == 0 {
		return ""
	}
	h := sha256.New()
	for _, e := range es {
		h.Write([]byte(e.ref + "|" + e.name + "=" + e.digest + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func oldBasis(fields []string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(strconv.Quote(f))
		b.WriteByte('\n')
	}
	return oldHex([]byte(b.String()))
}

func oldFacts(facts map[string]string) string {
	h := sha256.New()
	for _, f := range slices.Sorted(maps.Keys(facts)) {
		h.Write([]byte(f + "=" + facts[f] + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Args as the engine holds them (canonical JSON of a value decoded from
// JSON) digest the same whether hashed as they are — the engine's former
// formula — or canonicalised again by PayloadDigest, which the grant's
// verifier uses on the args the client sent.
func FuzzPayloadDigestOfCanonicalArgs(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"b":1,"a":"x"}`, `{"s":"line\n\"q\"\\"}`, "{\"u\":\"\xff\"}", `{"n":1.50e3,"m":-0,"k":1e400}`,
		` { "z" : [1, {"y":null, "x":true}] } `, `{"html":"<a&b>","c":"\u0001\u007f\u2028"}`, `{"a":1,"a":2}`, `{"":{"":[[],{}]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		m, err := plan.DecodeObject([]byte(raw))
		sent, sentErr := freshness.PayloadDigest([]byte(raw))
		if err != nil {
			if sentErr == nil {
				t.Fatalf("%q is not an object, yet digests as %s", raw, sent)
			}
			return
		}
		held := plan.AppendCanonical(nil, m)
		got, err := freshness.PayloadDigest(held)
		if err != nil {
			t.Fatalf("canonical args %s do not digest: %v", held, err)
		}
		if want := oldHex(held); got != want {
			t.Fatalf("args %s: PayloadDigest %s, the engine hashed them as %s", held, got, want)
		}
		if sentErr != nil || sent != got {
			t.Fatalf("args %q as sent digest %s (%v), as held %s", raw, sent, sentErr, got)
		}
	})
}

func FuzzDigestsMatchTheirFormerFormulas(f *testing.F) {
	f.Add("pay", "sha256:aa", "match", "claims.txt", "DE00 2048", uint8(3))
	f.Add("x=y\n", "", "a|b", "c=d", "\"q\"\n", uint8(0))
	f.Add("", "\xff", "", "", "", uint8(1))
	f.Fuzz(func(t *testing.T, a, b, c, d, e string, n uint8) {
		k := int(n % 5)
		strs := []string{a, b, c, d, e}
		var ps []payload
		var es []evidence
		facts := map[string]string{}
		for i := range k {
			ps = append(ps, payload{strs[i], strs[(i+1)%5]})
			es = append(es, evidence{strs[i], strs[(i+2)%5], strs[(i+3)%5]})
			facts[strs[i]] = strs[(i+4)%5]
		}
		if got, want := freshness.PayloadsDigest(ps, stepDigest), oldPayloads(ps); got != want {
			t.Fatalf("PayloadsDigest(%q) = %s, was %s", ps, got, want)
		}
		if got, want := freshness.EvidenceDigest(es, evidenceItem), oldEvidence(es); got != want {
			t.Fatalf("EvidenceDigest(%q) = %s, was %s", es, got, want)
		}
		if got, want := freshness.BasisDigest(strs[:k]...), oldBasis(strs[:k]); got != want {
			t.Fatalf("BasisDigest(%q) = %s, was %s", strs[:k], got, want)
		}
		if got, want := freshness.FactsDigest(facts), oldFacts(facts); got != want {
			t.Fatalf("FactsDigest(%q) = %s, was %s", facts, got, want)
		}
		if got, want := freshness.ContentDigest([]byte(a)), oldHex([]byte(a)); got != want {
			t.Fatalf("ContentDigest(%q) = %s, was %s", a, got, want)
		}
	})
}
