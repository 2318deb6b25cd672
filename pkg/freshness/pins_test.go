package freshness_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// The digests below were computed by the code this package replaced (the
// engine's, pkg/grant's, pkg/plan's and internal/store's own hashing) before
// it moved here. Stored journals, grants, votes and judged decisions carry
// them: a change to any value is a change of encoding, which breaks what is
// already recorded.

func TestPayloadDigestPinned(t *testing.T) {
	for _, c := range []struct {
		args, want string
		fails      bool
	}{
		{"", "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", false},
		{"{}", "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", false},
		{" { } ", "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", false},
		{"{\"b\":1,\"a\":\"x\"}", "sha256:cdab067e9f3beb32d1252cfd63e492592fecbf591b0d08cadb24bb17f3864246", false},
		{"{\"a\":\"x\",\"b\":1}", "sha256:cdab067e9f3beb32d1252cfd63e492592fecbf591b0d08cadb24bb17f3864246", false},
		{"{\"amount\":500,\"vendor\":\"V-1\"}", "sha256:0b144d832c848828d52d209cb84f814d303c119925db2096bc6fafa9f833fa3b", false},
		{"{\"s\":\"line\\n\\\"q\\\"\\\\\"}", "sha256:9832116ba285e5ae763dfaba1d276db2cb6fd05107ad1843f701d981f8e41330", false},
		{"{\"u\":\"\xff\"}", "sha256:3865bf166bd71bb1570bb5c63dee9196d8acd26a37065d7b28140d35544ae398", false},
		{"{\"u\":\"�\"}", "sha256:3865bf166bd71bb1570bb5c63dee9196d8acd26a37065d7b28140d35544ae398", false},
		{"{\"n\":1.50e3}", "sha256:870834e5bb5550d731cc131a5e0b212807df73287c8e4378a195af353a60e4a8", false},
		{" { \"z\" : [1, {\"y\":null, \"x\":true}] } ", "sha256:dd4b906ee8790b3aa208eb672e5c13a9cd87f8da43717a7c6bd4f5794ee2fd72", false},
		{"{\"html\":\"<a&b>\"}", "sha256:b2436fdc1718663ad6fa3b13917d9785504971401ff8fdce50eaf76646d94aed", false},
		{"{\"esc\":\"\\u00e9\\u2028\"}", "sha256:0dfcad731ebdca6908168deb97207b2f4537e4999af46d2e85dc42eff94ee963", false},
		{"[1]", "", true},
		{"not json", "", true},
		{"{\"a\":1}{\"b\":2}", "", true},
	} {
		got, err := freshness.PayloadDigest([]byte(c.args))
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("PayloadDigest(%q) = %q, %v; want %q (fails: %v)", c.args, got, err, c.want, c.fails)
		}
	}
}

// Args the engine holds are canonical already; the engine used to hash
// them as they were. That agrees with PayloadDigest for every value
// decoded from JSON (FuzzPayloadDigestOfCanonicalArgs). It did not agree
// for a Go string that is not UTF-8 (a step's non-JSON output spliced into
// args): the canonical form escapes the bad byte as \ufffd, which the
// grant's PayloadDigest re-reads as U+FFFD. Such an ask now quotes the
// digest its grant is signed with.
func TestPayloadDigestOfArgsWithInvalidUTF8(t *testing.T) {
	args := plan.AppendCanonical(nil, map[string]any{"out": "a\xffb"})
	if string(args) != `{"out":"a\ufffdb"}` {
		t.Fatalf("canonical form %s", args)
	}
	const grantDigest = "sha256:8f6a193e7aa99da43a602b785a723b64a257880951680df66389b11b0a07b943" // pkg/grant, before
	const engineBefore = "sha256:b85b585d42c2733b6d5e73901b2a9ac8f9876ae5ec4cac3acf7019e89a107c54"
	got, err := freshness.PayloadDigest(args)
	if err != nil || got != grantDigest {
		t.Fatalf("PayloadDigest = %q, %v; want the grant's %s", got, err, grantDigest)
	}
	if freshness.ContentDigest(args) != engineBefore {
		t.Fatal("the engine's former digest (the bytes as they were) is not what it was")
	}
}

func TestContentDigestPinned(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"hello":                    "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
		"\xff\x00":                 "sha256:ea5dbf9596d187e9500f23e9a680109475341cf4e81f7e043f7d97152c10772f",
		strings.Repeat("abc", 400): "sha256:c60f31dde430c46ed35613b85ed4e926db829917cb2248947abf1a7181e68bb3",
	} {
		if got := freshness.ContentDigest([]byte(in)); got != want {
			t.Errorf("ContentDigest(%.20q) = %s, want %s", in, got, want)
		}
		if got := freshness.ContentDigest([]byte(in)); len(got) != freshness.Size {
			t.Errorf("ContentDigest is %d long, Size says %d", len(got), freshness.Size)
		}
	}
}

type payload struct{ step, digest string }

func stepDigest(p payload) (string, string) { return p.step, p.digest }

func TestPayloadsDigestPinned(t *testing.T) {
	ps := []payload{{"pay", "sha256:aa"}, {"notify", "sha256:bb"}, {"x=y\n", "sha256:cc"}}
	for n, want := range []string{
		"",
		"sha256:aa",
		"sha256:fae0746c302c56f5ef577d384eeb2858c355e8c0e603e1a1ec834444fb1dd556",
		"sha256:5448afea465edb43599af6a7a89563116bf7ecc4e56218f97bccc1f59747ef22",
	} {
		if got := freshness.PayloadsDigest(ps[:n], stepDigest); got != want {
			t.Errorf("%d payloads: %q, want %q", n, got, want)
		}
	}
}

type evidence struct{ ref, name, digest string }

func evidenceItem(e evidence) (string, string, string) { return e.ref, e.name, e.digest }

func TestEvidenceDigestPinned(t *testing.T) {
	es := []evidence{{"match", "", "sha256:11"}, {"", "claims.txt", "sha256:22"}, {"a|b", "c=d", "sha256:33"}}
	for n, want := range []string{
		"",
		"sha256:c90e37a590a338e187e9c5f6fd93dd34ff0bad1066678a9c49bb4386b02a786d",
		"sha256:caf158cc4ac9d8a963dfb3952397884492f86e82e7eb5ff0938bf1e159e2e9e7",
		"sha256:b63887fc6d77fc962a76dd6ddb7bb1f8a804344fb4c3a4532cee9364fb6977e1",
	} {
		if got := freshness.EvidenceDigest(es[:n], evidenceItem); got != want {
			t.Errorf("%d artifacts: %q, want %q", n, got, want)
		}
	}
}

// The fields are those of engine.AskRun.Basis for the asks the old code
// was run on: type, state, audience, approvers, quorum, also, payload
// digest, evidence digest, round, resource version.
func TestBasisDigestPinned(t *testing.T) {
	for _, c := range []struct {
		fields []string
		want   string
	}{
		{[]string{"", "", "", "", "0", "", "", "", "0", ""}, "sha256:99f44fd663a7b924e47c4c954eb862cf95e833876926cf233300564467233a08"},
		{[]string{"gate", "pending", "finance", "dave,erin", "2", "x.y", "sha256:fae0746c302c56f5ef577d384eeb2858c355e8c0e603e1a1ec834444fb1dd556",
			"sha256:c90e37a590a338e187e9c5f6fd93dd34ff0bad1066678a9c49bb4386b02a786d", "3", "sha256:rv"}, "sha256:4efb5af926fa38a67fb1c603613d7ca9d3e7e896de4cebcf432e14995d2ec1b3"},
		{[]string{"in_doubt", "evidence_requested", "a\"b\n", "", "0", "", "sha256:aa", "", "0", ""}, "sha256:e681cf230efc1c87d381a4e42e0edf03a8900c195fc51102f3ccc70ed7711aed"},
	} {
		if got := freshness.BasisDigest(c.fields...); got != c.want {
			t.Errorf("BasisDigest(%q) = %s, want %s", c.fields, got, c.want)
		}
	}
}

func TestFactsDigestPinned(t *testing.T) {
	for _, c := range []struct {
		facts map[string]string
		want  string
	}{
		{map[string]string{}, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{map[string]string{"a": "1"}, "sha256:fe3209d6d4f51935b391288a43df48d9ddece1a992597ae53387ca16611a9179"},
		{map[string]string{"vendor.bank_account": `"DE00 2048"`, "amount": "500", "status": `"active"`}, "sha256:8600f2899db72a180fd56b47b57216a1c4dcebe407299030327c69e4ca44314c"},
		{map[string]string{"a=b": "c\nd"}, "sha256:7f03bf74834c0dae32971f1dfc2dde04f83760b1948246399d5c7dd05b1d8abb"},
	} {
		if got := freshness.FactsDigest(c.facts); got != c.want {
			t.Errorf("FactsDigest(%q) = %s, want %s", c.facts, got, c.want)
		}
	}
}

func TestValueDigestPinned(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "sha256:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"},
		{"V-1", "sha256:df31d3c4681c1be7ac477c82654bd9fdc8f0c6c3bb53ab4cc6360f76a57a0ad4"},
		{map[string]any{"b": "x", "a": []any{true, nil}}, "sha256:53edb451f1bfdc1e8228c164bb1503e1243a96649e244a0cda421ba7e09890e9"},
		{12, "sha256:6b51d431df5d7f141cbececcf79edf3dd861c3b4069f0b11661a3eefacbba918"},
		{json.Number("12"), "sha256:6b51d431df5d7f141cbececcf79edf3dd861c3b4069f0b11661a3eefacbba918"},
		{"a\"b", "sha256:8bbcb681750af483258c5ca72e83c5c397bf66aa01e7c7787c0d212fc1f6fa1d"},
	} {
		if got := freshness.ValueDigest(c.v); got != c.want {
			t.Errorf("ValueDigest(%v) = %s, want %s", c.v, got, c.want)
		}
	}
}

func TestMaskPinned(t *testing.T) {
	for _, c := range [][2]string{
		{"\"DE00 2048\"", "ending 2048"},
		{"\"active\"", "active"},
		{"\"12\"", "ending ••"},
		{"48", "ending ••"},
		{"null", "null"},
		{"\"ÄÖÜ1ß\"", "ending ÖÜ1ß"},
		{"\"x1\"", "ending ••"},
		{"{\"a\":1}", "ending \":1}"},
		{"\"\\u00e9 9876\"", "ending 9876"},
		{"\"\"", ""},
		{"true", "true"},
	} {
		if got := freshness.Mask(c[0]); got != c[1] {
			t.Errorf("Mask(%s) = %q, want %q", c[0], got, c[1])
		}
	}
}

func TestChangesNameWhatMovedMasked(t *testing.T) {
	before := map[string]string{"vendor.bank_account": `"DE00 2048"`, "status": `"active"`, "amount": "500"}
	now := map[string]string{"vendor.bank_account": `"DE99 7777"`, "status": `"blocked"`, "amount": "500"}
	want := []string{"status active → blocked", "vendor.bank_account ending 2048 → ending 7777"}
	if got := freshness.Changes(before, now); !slices.Equal(got, want) {
		t.Fatalf("Changes = %q, want %q", got, want)
	}
	if got := freshness.Changes(now, now); got != nil {
		t.Fatalf("unchanged facts: %q", got)
	}
}

func TestReadFacts(t *testing.T) {
	out, err := plan.DecodeObject([]byte(`{"vendor":{"bank_account":"DE00 2048","id":7},"status":"active"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := freshness.ReadFacts(out, []string{"vendor.bank_account", "vendor.id", "status", "missing.deep"})
	want := map[string]string{"vendor.bank_account": `"DE00 2048"`, "vendor.id": "7", "status": `"active"`, "missing.deep": "null"}
	if len(got) != len(want) {
		t.Fatalf("ReadFacts = %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("fact %s = %q, want %q", k, got[k], v)
		}
	}
}

// The digest is a property of the plan's meaning as encoded: the same
// plan always digests the same, whatever the key order or spacing of the
// JSON it came from, and any change of content changes it. The digest of
// DESIGN.md §3's example is pinned (testdata/design-example.digest) since
// issue 1.
func TestPlanDigestPinned(t *testing.T) {
	b, err := os.ReadFile("../plan/testdata/design-example.json")
	if err != nil {
		t.Fatal(err)
	}
	var p plan.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	d1, err := freshness.PlanDigest(&p)
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("testdata/design-example.digest")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(golden)); got != d1 {
		t.Fatalf("digest of the DESIGN example changed: was %s, now %s (an encoding change breaks every stored approval's binding)", got, d1)
	}
	// Re-decode from a re-ordered, re-spaced encoding.
	b, _ = plan.Indent(&p)
	var q plan.Plan
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	q.InitialSteps[0].Args = plan.Object(`{ }`)
	q.StoppingPoints[0].Options[0].Steps[0].Args = plan.Object("{\n \"text\" :\"{brief}\"}")
	if d2, _ := freshness.PlanDigest(&q); d2 != d1 {
		t.Fatalf("digest changed with formatting: %s vs %s", d1, d2)
	}
	q.StoppingPoints[0].Options[0].Steps[0].Args = plan.Object(`{"text":"{cpu}"}`)
	if d3, _ := freshness.PlanDigest(&q); d3 == d1 {
		t.Fatal("digest did not change when the args changed")
	}
}

// Records as internal/store's hash-chain test writes them, one per payload
// seed, with the hashes internal/store.HashRecord gave before it moved.
func TestJournalDigestPinned(t *testing.T) {
	at := time.Date(2026, 11, 30, 14, 0, 0, 123456789, time.FixedZone("x", 3600))
	for i, c := range [][2]string{
		{"", "sha256:3c2f620973edef9246d346f1fe0a47beca488d0126e98adf6408e187719e48a9"},
		{" ", "sha256:93f568ef2045c26ab3ee2919ae43fe2376e0f9143a50b9175543caac7a9e47ad"},
		{"{}", "sha256:3d48ea4a509c3d560954e3281d27c222a78fce6fa9c91b631e5f9d9bd3d405d6"},
		{"{\"step\":\"a\",\"attempt\":1,\"lease\":\"r/a/1\"}", "sha256:3c8cc0f119d343239dad2f88c820efe5cc68ca24720e0d24845950b4c4ac1cb7"},
		{"{\"attempt\":1,\"lease\":\"r/a/1\",\"step\":\"a\"}", "sha256:0739b7afcb262cc392cef12ce512d459a09aa5f75acea384ba828ea44b937b7e"},
		{"{\"b\":1, \"a\":[1,2,{\"z\":null,\"y\":true}]}", "sha256:bc4a56ec87105220e4f500436fdb2938a3a87cd40752bd157ef04fa15b8c9487"},
		{"{\"html\":\"<a&b>\"}", "sha256:85b9307e0dfa03fcddbea30e2138b6bf9b91cb4b4f14333f7927c1ed7d07ce3e"},
		{"{\"esc\":\"\\u00e9\\n\\\"q\\\"\"}", "sha256:5a744d7a30ee1b839ac869371ab1f21b34eabe276e71a070c54873bdb8e92f46"},
		{"not json", "sha256:8f395e503f3f8f941a5c10b0dcf015fe0839915f1818d558c132bb7deee20843"},
		{"[1,2]", "sha256:236357ee7bef9cfcafbee8a5f47c3ace693a967d7e7b7bd7d8253c8ba9a426a8"},
		{"\"s\"", "sha256:baaa581457ce26df9f96657b416f66d8ebacaa4be2431a1cdda707fe691ae219"},
		{"{\"a\":1}{\"b\":2}", "sha256:5761234a7392d3c46e905cfffb98ae2ab5377ef93869f3c2c7a48895295b00f9"},
		{"{\"n\":1.50e3}", "sha256:47f6fcd31bb4239f96d0e4d968321eb98f181392b8bdcfdb43e97d3ca530c4cb"},
		{"{\"u\":\"\xff\"}", "sha256:e7189a59da98de333c043a1a18c15c51b726adf86d5da1d332eaccb8bb29196c"},
		{"{\"a\":1,\"a\":2}", "sha256:2a1da240b98558f55404ae8df8bec4bbb6ab9ee2fee98161f7d00e5af865d3cc"},
	} {
		r := freshness.JournalRecord{RunID: "r_1", Seq: int64(i + 1), Time: at, Actor: "al\"ice<", Kind: "step.leased", PrevHash: "sha256:00", Payload: []byte(c[0])}
		if got := freshness.JournalDigest(r); got != c[1] {
			t.Errorf("payload %q: %s, want %s", c[0], got, c[1])
		}
	}
}
