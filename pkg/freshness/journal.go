package freshness

import (
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// JournalRecord is what a journal record's hash covers: every field of the
// record but the hash itself. Payload is the record's JSON payload as
// stored; the hash covers its canonical form (or, when it is not a JSON
// object, the bytes as a JSON string), so a store that re-encodes a
// payload does not break the chain.
type JournalRecord struct {
	RunID    string
	Seq      int64
	Time     time.Time
	Actor    string
	Kind     string
	Payload  []byte
	PrevHash string
}

// JournalDigest is the hash of r, the link of a run's hash chain (I8): the
// digest of the canonical JSON of {actor, kind, payload, prev_hash, run_id,
// seq, time (RFC 3339, UTC, nanoseconds as needed)}, an absent payload as
// null.
//
// It is on the commit path of every transition, so it writes those bytes
// directly, keys in their canonical (sorted) order, into a buffer on the
// stack, without decoding a payload that is already canonical.
func JournalDigest(r JournalRecord) string {
	var buf [1024]byte
	b := buf[:0]
	// The keys, punctuation and time take under 128 bytes; a record that
	// will not fit on the stack gets one allocation of about its size, not
	// a doubling series.
	if n := 128 + len(r.Actor) + len(r.Kind) + len(r.Payload) + len(r.PrevHash) + len(r.RunID); n > len(buf) {
		b = make([]byte, 0, n+n/16)
	}
	b = append(b, `{"actor":`...)
	b = plan.AppendCanonical(b, r.Actor)
	b = append(b, `,"kind":`...)
	b = plan.AppendCanonical(b, r.Kind)
	b = append(b, `,"payload":`...)
	switch {
	case len(r.Payload) == 0:
		b = append(b, "null"...)
	default:
		if c, ok := plan.AppendCanonicalObject(b, r.Payload); ok {
			b = c
		} else {
			b = plan.AppendCanonical(b, string(r.Payload))
		}
	}
	b = append(b, `,"prev_hash":`...)
	b = plan.AppendCanonical(b, r.PrevHash)
	b = append(b, `,"run_id":`...)
	b = plan.AppendCanonical(b, r.RunID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"time":`...)
	b = plan.AppendCanonical(b, r.Time.UTC().Format(time.RFC3339Nano))
	b = append(b, '}')
	return sum(b)
}
