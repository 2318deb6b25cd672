package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// hashRecordSlow is HashRecord as first written: the record as a decoded
// map, canonicalised. HashRecord writes the same bytes without decoding a
// payload that is already canonical.
func hashRecordSlow(r JournalRecord) string {
	var payload any
	if len(r.Payload) > 0 {
		if m, err := plan.DecodeObject(r.Payload); err == nil {
			payload = m
		} else {
			payload = string(r.Payload)
		}
	}
	b := plan.AppendCanonical(nil, map[string]any{
		"actor": r.Actor, "kind": r.Kind, "payload": payload, "prev_hash": r.PrevHash,
		"run_id": r.RunID, "seq": json.Number(fmt.Sprint(r.Seq)), "time": r.Time.UTC().Format(time.RFC3339Nano),
	})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

var hashSeeds = []string{
	``, ` `, `{}`, `{"step":"a","attempt":1,"lease":"r/a/1"}`, `{"attempt":1,"lease":"r/a/1","step":"a"}`,
	`{"b":1, "a":[1,2,{"z":null,"y":true}]}`, `{"html":"<a&b>"}`, `{"esc":"\u00e9\n\"q\""}`, `not json`,
	`[1,2]`, `"s"`, `{"a":1}{"b":2}`, `{"n":1.50e3}`, "{\"u\":\"\xff\"}", `{"a":1,"a":2}`,
}

func TestHashRecordMatchesDecodingPath(t *testing.T) {
	at := time.Date(2026, 11, 30, 14, 0, 0, 123456789, time.FixedZone("x", 3600))
	for i, p := range hashSeeds {
		r := JournalRecord{RunID: "r_1", Seq: int64(i + 1), Time: at, Actor: "al\"ice<", Kind: "step.leased", PrevHash: "sha256:00", Payload: json.RawMessage(p)}
		if got, want := HashRecord(r), hashRecordSlow(r); got != want {
			t.Errorf("payload %q: %s, the decoding path says %s", p, got, want)
		}
	}
}

func FuzzHashRecord(f *testing.F) {
	for _, p := range hashSeeds {
		f.Add(p, "alice", int64(3))
	}
	f.Fuzz(func(t *testing.T, payload, actor string, seq int64) {
		r := JournalRecord{RunID: "r_1", Seq: seq, Time: time.Unix(0, seq).UTC(), Actor: actor, Kind: "k", PrevHash: "p", Payload: json.RawMessage(payload)}
		if got, want := HashRecord(r), hashRecordSlow(r); got != want {
			t.Fatalf("payload %q: %s, the decoding path says %s", payload, got, want)
		}
	})
}
