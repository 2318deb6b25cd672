package redisstore

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
)

// A run's journal is kept as binary records: the newest in the tail of the
// run's own value, the older in the journal list, whose elements are
// tails the commit script moved there once they grew past spillAt bytes.
// Each commit appends its records as one group; a group's first record
// carries its time whole, the others as the nanoseconds since the record
// before. The parts (list elements, then the tail) read as one stream.
//
// A record is a flags byte, then its time, [actor], kind, [payload] and
// [hash]:
//
//	flags  bit 0 time whole (zigzag ns since the journal's epoch, the
//	       run's creation when it began, + 1; 0 for the zero time) rather
//	       than since the record before (zigzag ns);
//	       bit 1 the actor is the record before's (not written);
//	       bit 2 the kind is a byte, its index in journalKinds;
//	       bit 3 a payload follows (uvarint length, bytes); bit 4 it is
//	       packed (packPayload); bit 5 its hash is written (a string:
//	       one that is not its record's digest); bit 6 it ends its group
//
// Strings are as in the run's meta. Seq, prev hash and most hashes are
// not kept but derived: the records are in seq order from the journal's
// base (the run's meta); each one's prev hash is the hash of the record
// before (the first's is in the meta); a record's hash is its digest
// (store.HashRecord), but for the last of each group, whose hash is kept
// as given: the 32 bytes after the group (the commit script writes the
// stored head there when it appends the next group), or, for the last
// group, the run's journal head. Derived hashes are checked against
// those: a record altered in Redis changes the digests after it, so its
// group's last record reads back with a hash that is not its digest, and
// store.VerifyChain (the audit) reports it, at that record.
const (
	recWholeTime = 1 << 0
	recSameActor = 1 << 1
	recKindIndex = 1 << 2
	recPayload   = 1 << 3
	recPacked    = 1 << 4
	recHashKept  = 1 << 5
	recGroupEnd  = 1 << 6
)

// spillAt is how large (in bytes, decimal) the journal tail may grow in
// the run's value before the commit script moves it to the journal list.
const spillAt = "2048"

// journalKinds are the kinds a record keeps as one byte: its index here.
// Stored records name kinds by index, so the list only ever grows at the
// end (at most 255).
var journalKinds = [...]string{
	"run.started", "run.state", "run.cancel", "run.finish", "run.ended",
	"step.dispatched", "step.leased", "step.started", "step.succeeded", "step.failed",
	"step.lease_lost", "step.lease_moved", "step.result_after_end", "step.cancelled", "step.blocked",
	"step.reprepare", "step.recorded", "join.held", "join.failed",
	"ask.opened", "ask.facts", "ask.reminded", "ask.escalated", "ask.quorum_raised", "ask.voted",
	"ask.amended", "ask.evidence_requested", "ask.evidence_attached", "ask.delegated", "ask.reply",
	"ask.decided", "ask.expired", "ask.stale", "ask.closed",
	"approval.consumed", "approval.reused", "approval.revoked", "approval.fresh", "notice.delivery",
}

var kindIndex = func() map[string]byte {
	m := make(map[string]byte, len(journalKinds))
	for i, k := range journalKinds {
		m[k] = byte(i)
	}
	return m
}()

// appendGroup appends a commit's records. They must chain: each record's
// prev hash is the hash of the one before it. runID is their run's, and
// digest and epoch the journal's (packPayload's tokDigestOfRun; whole
// times are written from epoch).
func appendGroup(b []byte, runID string, recs []store.JournalRecord, digest string, epoch time.Time) ([]byte, error) {
	base := timeBase(epoch)
	for i, r := range recs {
		if i > 0 && r.PrevHash != recs[i-1].Hash {
			return nil, fmt.Errorf("%w: journal record %d does not follow record %d", store.ErrInvalid, r.Seq, recs[i-1].Seq)
		}
		last := i == len(recs)-1
		flags := byte(0)
		whole := i == 0 || r.Time.IsZero() || recs[i-1].Time.IsZero()
		if whole {
			flags |= recWholeTime
		}
		if i > 0 && r.Actor == recs[i-1].Actor {
			flags |= recSameActor
		}
		k, known := kindIndex[r.Kind]
		if known {
			flags |= recKindIndex
		}
		var packed []byte
		if len(r.Payload) > 0 {
			flags |= recPayload
			if p, ok := packPayload(r.Payload, digest); ok {
				packed, flags = p, flags|recPacked
			} else {
				packed = r.Payload
			}
		}
		// The last record's hash is the head, kept in the run's header
		// (the commit checks it is a digest); another is derived if it
		// is its record's digest.
		if as := (store.JournalRecord{RunID: runID, Seq: r.Seq, Time: r.Time, Actor: r.Actor, Kind: r.Kind, Payload: r.Payload,
			PrevHash: r.PrevHash}); !last && r.Hash != store.HashRecord(as) {
			flags |= recHashKept
		}
		if last {
			flags |= recGroupEnd
		}
		b = append(b, flags)
		if whole {
			b = appendTime(b, r.Time, base)
		} else {
			d := r.Time.UnixNano() - recs[i-1].Time.UnixNano()
			b = binary.AppendUvarint(b, uint64(d<<1)^uint64(d>>63))
		}
		if flags&recSameActor == 0 {
			b = appendStr(b, r.Actor)
		}
		if known {
			b = append(b, k)
		} else {
			b = appendStr(b, r.Kind)
		}
		if len(r.Payload) > 0 {
			b = binary.AppendUvarint(b, uint64(len(packed)))
			b = append(b, packed...)
		}
		if flags&recHashKept != 0 {
			b = appendStr(b, r.Hash)
		}
	}
	return b, nil
}

// decodeJournal decodes the records with seq > after (up to limit; 0 for
// all) from a run's journal list elements and tail (parts, in order).
// Only the groups that hold them have their digests computed.
func decodeJournal(h runHead, parts []string, after int64, limit int) ([]store.JournalRecord, error) {
	type decoded struct {
		rec  store.JournalRecord
		kept bool // its hash was written (or is its group's end hash)
	}
	bad := func(seq int64) ([]store.JournalRecord, error) {
		return nil, fmt.Errorf("redisstore: a journal record of %s is damaged (after seq %d)", h.run.ID, seq)
	}
	r := reader{s: strings.Join(parts, "")}
	var recs []decoded
	var groupStart []int // index in recs of each group's first record
	var prevTime time.Time
	var prevActor string
	epoch := timeBase(h.epoch)
	seq := h.base
	start := true
	for len(r.s) > 0 {
		if start {
			groupStart = append(groupStart, len(recs))
			start = false
		}
		flags := r.byte()
		rec := store.JournalRecord{RunID: h.run.ID, Seq: seq + 1}
		if flags&recWholeTime != 0 {
			rec.Time = r.time(epoch)
		} else {
			z := r.uvarint()
			rec.Time = time.Unix(0, prevTime.UnixNano()+(int64(z>>1)^-int64(z&1))).UTC()
		}
		if flags&recSameActor != 0 {
			rec.Actor = prevActor
		} else {
			rec.Actor = r.str()
		}
		if flags&recKindIndex != 0 {
			k := int(r.byte())
			if k >= len(journalKinds) {
				return bad(seq)
			}
			rec.Kind = journalKinds[k]
		} else {
			rec.Kind = r.str()
		}
		if flags&recPayload != 0 {
			p := r.take(r.uvarint())
			if flags&recPacked != 0 {
				var err error
				if rec.Payload, err = unpackPayload(p, h.journalDigest); err != nil {
					return bad(seq)
				}
			} else {
				rec.Payload = []byte(p)
			}
		}
		kept := false
		if flags&recHashKept != 0 {
			rec.Hash, kept = r.str(), true
		}
		if flags&recGroupEnd != 0 {
			start, kept = true, true
			if len(r.s) > 0 {
				rec.Hash = freshness.Unpack(r.take(32))
			} else {
				rec.Hash = h.run.JournalHead
			}
		}
		if r.err != nil {
			return bad(seq)
		}
		seq, prevTime, prevActor = rec.Seq, rec.Time, rec.Actor
		recs = append(recs, decoded{rec, kept})
	}
	if !start && len(recs) > 0 {
		return bad(seq) // the last group has no end
	}
	from := max(0, int(after-h.base))
	if from >= len(recs) {
		return nil, nil
	}
	to := len(recs)
	if limit > 0 && limit < to-from { // (from+limit may overflow)
		to = from + limit
	}
	// Chain from the start of the group that holds the first record
	// asked for: the group before it ends in a kept hash.
	g := 0
	for g+1 < len(groupStart) && groupStart[g+1] <= from {
		g++
	}
	prev := h.firstPrev
	if i := groupStart[g]; i > 0 {
		prev = recs[i-1].rec.Hash
	}
	out := make([]store.JournalRecord, 0, to-from)
	for i := groupStart[g]; i < to; i++ {
		rec := recs[i].rec
		rec.PrevHash = prev
		if !recs[i].kept {
			rec.Hash = store.HashRecord(rec)
		}
		prev = rec.Hash
		if i >= from {
			out = append(out, rec)
		}
	}
	return out, nil
}

// --- payloads ---

// A payload is packed when that is shorter and it holds no byte below
// 0x20 but tab, newline and return (as valid JSON never does): those bytes
// stand for text that payloads repeat.
//
//	0x01 + 32 bytes   "sha256:…" (a digest, quotes included)
//	0x02 + uvarint    "2026-12-07T00:31:19.801530132Z" (a UTC time as
//	                  RFC 3339 with nanoseconds writes it, quotes
//	                  included): zigzag ns since the epoch
//	0x03              "sha256:…" when it is the journal's digest (the
//	                  run's plan digest when the journal began)
//	0x04…             `"KEY":` for a key of payloadKeys, in order
//
// The tokens and keys are stored data: never change or reorder them.
const (
	tokDigest      = 0x01
	tokTime        = 0x02
	tokDigestOfRun = 0x03
)

// payloadKeys are the keys the engine's records use most.
var payloadKeys = [...]string{
	"ask", "step", "attempt", "status", "reason", "option", "why", "digest", "to", "from",
	"round", "title", "expires_at", "error", "decision", "state", "grant", "lease", "by",
	"plan_digest", "quorum", "votes",
}

// keyTokens are the bytes that stand for payloadKeys: 0x04 onwards,
// skipping tab, newline and return.
var keyTokens, tokenKeys = func() ([len(payloadKeys)]byte, [32]string) {
	var toks [len(payloadKeys)]byte
	var keys [32]string
	c := byte(4)
	for i, k := range payloadKeys {
		for c == '\t' || c == '\n' || c == '\r' {
			c++
		}
		toks[i], keys[c] = c, `"`+k+`":`
		c++
	}
	if c > 0x20 {
		panic("redisstore: too many payload keys")
	}
	return toks, keys
}()

var keyToken = func() map[string]byte {
	m := make(map[string]byte, len(payloadKeys))
	for i, k := range payloadKeys {
		m[k] = keyTokens[i]
	}
	return m
}()

// packPayload packs p, if it may be packed and that makes it shorter;
// digest is the journal's.
func packPayload(p []byte, digest string) ([]byte, bool) {
	for _, c := range p {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return nil, false
		}
	}
	out := make([]byte, 0, len(p))
	for i := 0; i < len(p); {
		if p[i] != '"' {
			out = append(out, p[i])
			i++
			continue
		}
		end := i + 1
		for end < len(p) && p[end] != '"' && p[end] != '\\' {
			end++
		}
		if end >= len(p) || p[end] != '"' {
			out = append(out, p[i])
			i++
			continue
		}
		s := string(p[i+1 : end]) // the string's text, without escapes
		if end+1 < len(p) && p[end+1] == ':' {
			if t, ok := keyToken[s]; ok {
				out = append(out, t)
				i = end + 2
				continue
			}
		}
		if s == digest && digest != "" {
			out = append(out, tokDigestOfRun)
			i = end + 1
			continue
		}
		if d, ok := freshness.Pack(s); ok {
			out = append(out, tokDigest)
			out = append(out, d[:]...)
			i = end + 1
			continue
		}
		if ns, ok := packTime(s); ok {
			out = append(out, tokTime)
			out = binary.AppendUvarint(out, uint64(ns<<1)^uint64(ns>>63))
			i = end + 1
			continue
		}
		out = append(out, p[i:end+1]...)
		i = end + 1
	}
	if len(out) >= len(p) {
		return nil, false
	}
	return out, true
}

// packTime is s as nanoseconds since the epoch, if s is exactly how
// RFC 3339 with nanoseconds writes that time in UTC.
func packTime(s string) (int64, bool) {
	if len(s) < 20 || len(s) > 30 || s[len(s)-1] != 'Z' || s[4] != '-' || s[10] != 'T' {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 1679 || t.Year() > 2261 || t.UTC().Format(time.RFC3339Nano) != s {
		return 0, false
	}
	return t.UnixNano(), true
}

// unpackPayload gives back the bytes packPayload packed with digest.
func unpackPayload(p, digest string) ([]byte, error) {
	out := make([]byte, 0, 2*len(p))
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c >= 0x20 || c == '\t' || c == '\n' || c == '\r':
			j := i + 1
			for j < len(p) && (p[j] >= 0x20 || p[j] == '\t' || p[j] == '\n' || p[j] == '\r') {
				j++
			}
			out = append(out, p[i:j]...)
			i = j
		case c == tokDigest:
			if i+33 > len(p) {
				return nil, fmt.Errorf("damaged payload")
			}
			out = append(out, '"')
			out = append(out, freshness.Unpack(p[i+1:i+33])...)
			out = append(out, '"')
			i += 33
		case c == tokDigestOfRun:
			out = append(out, '"')
			out = append(out, digest...)
			out = append(out, '"')
			i++
		case c == tokTime:
			r := reader{s: p[i+1:]}
			z := r.uvarint()
			if r.err != nil {
				return nil, fmt.Errorf("damaged payload")
			}
			out = append(out, '"')
			out = time.Unix(0, int64(z>>1)^-int64(z&1)).UTC().AppendFormat(out, time.RFC3339Nano)
			out = append(out, '"')
			i = len(p) - len(r.s)
		case tokenKeys[c] != "":
			out = append(out, tokenKeys[c]...)
			i++
		default:
			return nil, fmt.Errorf("damaged payload")
		}
	}
	return out, nil
}

// journalParts splits the journal script's reply: the run's header and
// meta, its tail, then the list's elements (oldest first).
func journalParts(reply []any) (head string, parts []string, ok bool) {
	if len(reply) < 2 {
		return "", nil, false
	}
	head, _ = reply[0].(string)
	tail, _ := reply[1].(string)
	for _, v := range reply[2:] {
		s, _ := v.(string)
		parts = append(parts, s)
	}
	return head, append(parts, tail), len(head) > 0 && head[0] == runFormat
}
