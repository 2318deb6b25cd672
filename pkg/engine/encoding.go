package engine

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// The compact encoding of a Run: what a store keeps of it, several times
// smaller than its JSON and cheaper to write and read (no field names, no
// text times, digests as their 32 bytes).
//
// Layout (version 1): the byte binVersion, then the Run as a record. A
// record is a uvarint mask of the fields present, bit i for the struct's
// i-th field in the order the encoder below writes them, followed by
// those fields in that order. Absent means the zero value: "", 0, false,
// the zero time, a nil slice or map (an empty but non-nil one is present,
// with length 0). So a field appended to a struct takes the next bit and
// older values read as before; a field is never removed or reordered.
//
//   - integers: zigzag varints; strings: uvarint(2·len) and the bytes, or
//     uvarint(1) and 32 bytes for a "sha256:" digest of 64 lowercase hex
//     digits, or uvarint(2·i+3) for the i-th of commonStrings; raw bytes
//     (JSON, artifacts): uvarint(len+1), 0 for nil.
//   - slices: uvarint(len) then the elements; maps: uvarint(len) then the
//     pairs, keys in ascending order (so the encoding is deterministic);
//     a pointer in a map: 0 for nil, else its record's mask·2+1.
//   - times: a uvarint whose two low bits say how: 0 the nanoseconds
//     from the run's CreatedAt (zigzag, above the two bits), in UTC;
//     1 UTC seconds and nanoseconds since the epoch (varint, uvarint);
//     2 the same and a zone (offset seconds as a varint, then its name as
//     a string). Decoded times have no monotonic reading, and a zone
//     other than UTC comes back as a fixed zone of the same name and
//     offset (time.Local too: as from JSON, but with its name).
//
// Round trip: UnmarshalBinary of what AppendBinary wrote gives a Run that
// reflect.DeepEqual holds equal to the original, for every Run whose
// times are UTC or fixed zones without monotonic readings (the derived
// tally is left nil, as a decoded run's always is). encoding_test.go
// fills every field of every struct by reflection to hold this.

// binVersion starts every compact encoding.
const binVersion = 1

// storedQuote wraps the compact encoding, in standard base64, into a
// JSON string: the form EncodeStored gives a store.
const storedQuote = '"'

var b64 = base64.StdEncoding.Strict()

// ErrBadEncoding says bytes are not a compact encoding of a Run.
var ErrBadEncoding = errors.New("not a compact encoding of a run")

// EncodeStored is the form a store keeps a run in: its compact encoding,
// in standard base64, as a JSON string. It is valid JSON, so a reader
// that unmarshals stored bytes into a Run with encoding/json reads it
// (Run.UnmarshalJSON); a store that keeps bytes may keep the decoded
// base64 and give back the same string.
func EncodeStored(r *Run) ([]byte, error) {
	bin, err := r.AppendBinary(make([]byte, 0, 256))
	if err != nil {
		return nil, err
	}
	out := make([]byte, b64.EncodedLen(len(bin))+2)
	out[0] = storedQuote
	b64.Encode(out[1:], bin)
	out[len(out)-1] = storedQuote
	return out, nil
}

// DecodeStored reads a run in any form a store may hold: EncodeStored's,
// or the JSON object that runs were stored as before it (still read).
func DecodeStored(data []byte) (*Run, error) {
	var r Run
	switch {
	case len(data) >= 2 && data[0] == storedQuote && data[len(data)-1] == storedQuote:
		bin := make([]byte, b64.DecodedLen(len(data)-2))
		n, err := b64.Decode(bin, data[1:len(data)-1])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadEncoding, err)
		}
		if err := r.UnmarshalBinary(bin[:n]); err != nil {
			return nil, err
		}
	default:
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

// UnmarshalJSON reads a Run from its JSON object, or from the JSON string
// EncodeStored writes (a null leaves r as it is).
func (r *Run) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == storedQuote:
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		bin, err := b64.DecodeString(s)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadEncoding, err)
		}
		return r.UnmarshalBinary(bin)
	}
	type plain Run // the same fields, without this method
	return json.Unmarshal(b, (*plain)(r))
}

// MarshalBinary is the compact encoding of r.
func (r *Run) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// AppendBinary appends the compact encoding of r to b.
func (r *Run) AppendBinary(b []byte) ([]byte, error) {
	e := encoder{b: append(b, binVersion)}
	e.base, e.hasBase = baseOf(r.CreatedAt)
	e.run(r)
	return e.b, nil
}

// UnmarshalBinary replaces r with the run b encodes.
func (r *Run) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != binVersion {
		return fmt.Errorf("%w: version byte %v", ErrBadEncoding, b[:min(len(b), 1)])
	}
	d := decoder{b: b[1:]}
	var out Run
	d.run(&out)
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the run", len(d.b))
	}
	if d.err != nil {
		return d.err
	}
	*r = out
	return nil
}

// baseOf is t in nanoseconds since the epoch, if that fits an int64 (the
// years 1679 to 2261; not the zero time).
func baseOf(t time.Time) (int64, bool) {
	if s := t.Unix(); s <= -9e9 || s >= 9e9 {
		return 0, false
	}
	return t.UnixNano(), true
}

// --- encoder ---

type encoder struct {
	b       []byte
	base    int64
	hasBase bool
}

// mask builds a record's mask: present(i, ok) sets bit i when ok.
type mask uint64

func (m *mask) set(i uint, ok bool) {
	if ok {
		*m |= 1 << i
	}
}

func (m mask) has(i uint) bool { return m&(1<<i) != 0 }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }

func (e *encoder) str(s string) {
	if i, ok := commonIndex[s]; ok {
		e.uvarint(uint64(i)<<1 + 3)
		return
	}
	if d, ok := freshness.Pack(s); ok {
		e.b = append(e.b, 1)
		e.b = append(e.b, d[:]...)
		return
	}
	e.uvarint(uint64(len(s)) << 1)
	e.b = append(e.b, s...)
}

func (e *encoder) raw(p []byte) {
	if p == nil {
		e.b = append(e.b, 0)
		return
	}
	e.uvarint(uint64(len(p)) + 1)
	e.b = append(e.b, p...)
}

func (e *encoder) strs(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *encoder) strMap(m map[string]string) {
	e.uvarint(uint64(len(m)))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e.str(k)
		e.str(m[k])
	}
}

func (e *encoder) time(t time.Time) {
	utc := t.Location() == time.UTC
	if utc && e.hasBase {
		if n, ok := baseOf(t); ok {
			if d, ok := subNoOverflow(n, e.base); ok && d > math.MinInt64>>3 && d < math.MaxInt64>>3 {
				e.uvarint(zigzag(d) << 2)
				return
			}
		}
	}
	if utc {
		e.uvarint(1)
		e.varint(t.Unix())
		e.uvarint(uint64(t.Nanosecond()))
		return
	}
	name, off := t.Zone()
	e.uvarint(2)
	e.varint(t.Unix())
	e.uvarint(uint64(t.Nanosecond()))
	e.varint(int64(off))
	e.str(name)
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func subNoOverflow(a, b int64) (int64, bool) {
	d := a - b
	return d, (a >= 0) == (b >= 0) || (d >= 0) == (a >= 0)
}

func (e *encoder) run(r *Run) {
	var m mask
	m.set(0, !r.CreatedAt.IsZero())
	m.set(1, r.ID != "")
	m.set(2, r.PlanDigest != "")
	m.set(3, r.Requester != "")
	m.set(4, r.State != "")
	m.set(5, r.Reason != "")
	m.set(6, r.Version != 0)
	m.set(7, !r.UpdatedAt.IsZero())
	m.set(8, r.Phases != nil)
	m.set(9, r.Steps != nil)
	m.set(10, r.Asks != nil)
	m.set(11, r.Failing != "")
	m.set(12, r.External)
	m.set(13, r.Inputs != nil)
	m.set(14, r.Origin != Origin{})
	m.set(15, r.Parks != 0)
	m.set(16, !r.ParkedAt.IsZero())
	m.set(17, !r.ResumedAt.IsZero())
	e.uvarint(uint64(m))
	if m.has(0) {
		// Absolute: it is the base of the others.
		has := e.hasBase
		e.hasBase = false
		e.time(r.CreatedAt)
		e.hasBase = has
	}
	if m.has(1) {
		e.str(r.ID)
	}
	if m.has(2) {
		e.str(r.PlanDigest)
	}
	if m.has(3) {
		e.str(r.Requester)
	}
	if m.has(4) {
		e.str(string(r.State))
	}
	if m.has(5) {
		e.str(r.Reason)
	}
	if m.has(6) {
		e.varint(r.Version)
	}
	if m.has(7) {
		e.time(r.UpdatedAt)
	}
	if m.has(8) {
		e.strs(r.Phases)
	}
	if m.has(9) {
		e.uvarint(uint64(len(r.Steps)))
		for _, k := range slices.Sorted(maps.Keys(r.Steps)) {
			e.str(k)
			e.step(r.Steps[k])
		}
	}
	if m.has(10) {
		e.uvarint(uint64(len(r.Asks)))
		for _, k := range slices.Sorted(maps.Keys(r.Asks)) {
			e.str(k)
			e.ask(r.Asks[k])
		}
	}
	if m.has(11) {
		e.str(r.Failing)
	}
	if m.has(13) {
		e.strMap(r.Inputs)
	}
	if m.has(14) {
		e.origin(r.Origin)
	}
	if m.has(15) {
		e.varint(int64(r.Parks))
	}
	if m.has(16) {
		e.time(r.ParkedAt)
	}
	if m.has(17) {
		e.time(r.ResumedAt)
	}
}

func (e *encoder) origin(o Origin) {
	var m mask
	m.set(0, o.Skill != "")
	m.set(1, o.SkillVersion != 0)
	m.set(2, o.Schedule != "")
	m.set(3, !o.Tick.IsZero())
	e.uvarint(uint64(m))
	if m.has(0) {
		e.str(o.Skill)
	}
	if m.has(1) {
		e.varint(o.SkillVersion)
	}
	if m.has(2) {
		e.str(o.Schedule)
	}
	if m.has(3) {
		e.time(o.Tick)
	}
}

func (e *encoder) step(s *StepRun) {
	if s == nil {
		e.b = append(e.b, 0)
		return
	}
	var m mask
	m.set(0, s.Status != "")
	m.set(1, s.Attempt != 0)
	m.set(2, s.Attempts != nil)
	m.set(3, s.Output != nil)
	m.set(4, s.Error != "")
	m.set(5, s.Grant != "")
	m.set(6, s.Blocked)
	e.uvarint(uint64(m)<<1 | 1)
	if m.has(0) {
		e.str(string(s.Status))
	}
	if m.has(1) {
		e.varint(int64(s.Attempt))
	}
	if m.has(2) {
		e.uvarint(uint64(len(s.Attempts)))
		for i := range s.Attempts {
			e.attempt(&s.Attempts[i])
		}
	}
	if m.has(3) {
		e.raw(s.Output)
	}
	if m.has(4) {
		e.str(s.Error)
	}
	if m.has(5) {
		e.str(s.Grant)
	}
}

func (e *encoder) attempt(a *Attempt) {
	var m mask
	m.set(0, a.N != 0)
	m.set(1, a.Executor != "")
	m.set(2, a.LeaseID != "")
	m.set(3, a.Replica != "")
	m.set(4, !a.QueuedAt.IsZero())
	m.set(5, !a.LeasedAt.IsZero())
	m.set(6, !a.StartedAt.IsZero())
	m.set(7, !a.FinishedAt.IsZero())
	m.set(8, a.Error != "")
	e.uvarint(uint64(m))
	if m.has(0) {
		e.varint(int64(a.N))
	}
	if m.has(1) {
		e.str(a.Executor)
	}
	if m.has(2) {
		e.str(a.LeaseID)
	}
	if m.has(3) {
		e.str(a.Replica)
	}
	if m.has(4) {
		e.time(a.QueuedAt)
	}
	if m.has(5) {
		e.time(a.LeasedAt)
	}
	if m.has(6) {
		e.time(a.StartedAt)
	}
	if m.has(7) {
		e.time(a.FinishedAt)
	}
	if m.has(8) {
		e.str(a.Error)
	}
}

// askFields is how many fields an AskRun record has (its mask's width).
const askFields = 42

func (e *encoder) ask(a *AskRun) {
	if a == nil {
		e.b = append(e.b, 0)
		return
	}
	var m mask
	m.set(0, a.ID != "")
	m.set(1, a.Type != "")
	m.set(2, a.Title != "")
	m.set(3, a.Audience != "")
	m.set(4, a.State != "")
	m.set(5, !a.OpenedAt.IsZero())
	m.set(6, !a.ExpiresAt.IsZero())
	m.set(7, a.Options != nil)
	m.set(8, a.Payload != nil)
	m.set(9, a.Quorum != 0)
	m.set(10, a.Step != "")
	m.set(11, a.Summary != "")
	m.set(12, a.Added)
	m.set(13, a.OnExpiry != "")
	m.set(14, a.Also != nil)
	m.set(15, a.Option != "")
	m.set(16, a.Label != "")
	m.set(17, a.Text != "")
	m.set(18, a.Misses != 0)
	m.set(19, a.Decisions != nil)
	m.set(20, a.Approvers != nil)
	m.set(21, a.Votes != nil)
	m.set(22, a.Amend != nil)
	m.set(23, a.HasCheck)
	m.set(24, !a.RemindAt.IsZero())
	m.set(25, a.Reminded)
	m.set(26, !a.EscalateAt.IsZero())
	m.set(27, a.EscalateTo != "")
	m.set(28, a.EscalatedTo != "")
	m.set(29, a.EscalatedFrom != "")
	m.set(30, a.Evidence != nil)
	m.set(31, a.EvidenceRounds != 0)
	m.set(32, a.EvidenceWanted != "")
	m.set(33, a.Delegations != nil)
	m.set(34, a.Material != nil)
	m.set(35, a.ResourceVersion != "")
	m.set(36, a.FactsError != "")
	m.set(37, a.Verifying)
	m.set(38, a.VerifyAttempt != 0)
	m.set(39, a.Round != 0)
	m.set(40, a.Stale != "")
	m.set(41, !a.Closed.IsZero())
	e.uvarint(uint64(m)<<1 | 1)
	if m.has(0) {
		e.str(a.ID)
	}
	if m.has(1) {
		e.str(string(a.Type))
	}
	if m.has(2) {
		e.str(a.Title)
	}
	if m.has(3) {
		e.str(a.Audience)
	}
	if m.has(4) {
		e.str(string(a.State))
	}
	if m.has(5) {
		e.time(a.OpenedAt)
	}
	if m.has(6) {
		e.time(a.ExpiresAt)
	}
	if m.has(7) {
		e.uvarint(uint64(len(a.Options)))
		for i := range a.Options {
			e.option(&a.Options[i])
		}
	}
	if m.has(8) {
		e.uvarint(uint64(len(a.Payload)))
		for i := range a.Payload {
			e.payload(&a.Payload[i])
		}
	}
	if m.has(9) {
		e.varint(int64(a.Quorum))
	}
	if m.has(10) {
		e.str(a.Step)
	}
	if m.has(11) {
		e.str(a.Summary)
	}
	if m.has(13) {
		e.str(a.OnExpiry)
	}
	if m.has(14) {
		e.strs(a.Also)
	}
	if m.has(15) {
		e.str(a.Option)
	}
	if m.has(16) {
		e.str(a.Label)
	}
	if m.has(17) {
		e.str(a.Text)
	}
	if m.has(18) {
		e.varint(int64(a.Misses))
	}
	if m.has(19) {
		e.uvarint(uint64(len(a.Decisions)))
		for i := range a.Decisions {
			e.decision(&a.Decisions[i])
		}
	}
	if m.has(20) {
		e.strs(a.Approvers)
	}
	if m.has(21) {
		e.uvarint(uint64(len(a.Votes)))
		for i := range a.Votes {
			e.vote(&a.Votes[i])
		}
	}
	if m.has(22) {
		e.uvarint(uint64(len(a.Amend)))
		for _, ab := range a.Amend {
			e.str(ab.Field)
			e.varint(ab.Min)
			e.varint(ab.Max)
		}
	}
	if m.has(24) {
		e.time(a.RemindAt)
	}
	if m.has(26) {
		e.time(a.EscalateAt)
	}
	if m.has(27) {
		e.str(a.EscalateTo)
	}
	if m.has(28) {
		e.str(a.EscalatedTo)
	}
	if m.has(29) {
		e.str(a.EscalatedFrom)
	}
	if m.has(30) {
		e.uvarint(uint64(len(a.Evidence)))
		for i := range a.Evidence {
			e.evidence(&a.Evidence[i])
		}
	}
	if m.has(31) {
		e.varint(int64(a.EvidenceRounds))
	}
	if m.has(32) {
		e.str(a.EvidenceWanted)
	}
	if m.has(33) {
		e.uvarint(uint64(len(a.Delegations)))
		for _, d := range a.Delegations {
			e.str(d.From)
			e.str(d.To)
			e.time(d.At)
			e.str(d.Reason)
		}
	}
	if m.has(34) {
		e.strMap(a.Material)
	}
	if m.has(35) {
		e.str(a.ResourceVersion)
	}
	if m.has(36) {
		e.str(a.FactsError)
	}
	if m.has(38) {
		e.varint(int64(a.VerifyAttempt))
	}
	if m.has(39) {
		e.varint(int64(a.Round))
	}
	if m.has(40) {
		e.str(a.Stale)
	}
	if m.has(41) {
		e.time(a.Closed)
	}
}

// option writes a stopping point's option: its id and label (all a run's
// asks keep); a plan's continuation, should one be there, as JSON.
func (e *encoder) option(o *plan.Option) {
	var m mask
	m.set(0, o.ID != "")
	m.set(1, o.Label != "")
	m.set(2, o.Steps != nil)
	m.set(3, o.StoppingPoints != nil)
	e.uvarint(uint64(m))
	if m.has(0) {
		e.str(o.ID)
	}
	if m.has(1) {
		e.str(o.Label)
	}
	if m.has(2) {
		j, _ := json.Marshal(o.Steps) // plan types always marshal
		e.raw(j)
	}
	if m.has(3) {
		j, _ := json.Marshal(o.StoppingPoints)
		e.raw(j)
	}
}

func (e *encoder) payload(p *Payload) {
	var m mask
	m.set(0, p.Step != "")
	m.set(1, p.Server != "")
	m.set(2, p.Tool != "")
	m.set(3, p.Args != nil)
	m.set(4, p.Digest != "")
	e.uvarint(uint64(m))
	if m.has(0) {
		e.str(p.Step)
	}
	if m.has(1) {
		e.str(p.Server)
	}
	if m.has(2) {
		e.str(p.Tool)
	}
	if m.has(3) {
		e.raw(p.Args)
	}
	if m.has(4) {
		e.str(p.Digest)
	}
}

func (e *encoder) evidence(v *Evidence) {
	var m mask
	m.set(0, v.Ref != "")
	m.set(1, v.Name != "")
	m.set(2, v.MediaType != "")
	m.set(3, v.Content != nil)
	m.set(4, v.Digest != "")
	m.set(5, v.AttachedBy != "")
	m.set(6, v.Round != 0)
	e.uvarint(uint64(m))
	if m.has(0) {
		e.str(v.Ref)
	}
	if m.has(1) {
		e.str(v.Name)
	}
	if m.has(2) {
		e.str(v.MediaType)
	}
	if m.has(3) {
		e.raw(v.Content)
	}
	if m.has(4) {
		e.str(v.Digest)
	}
	if m.has(5) {
		e.str(v.AttachedBy)
	}
	if m.has(6) {
		e.varint(int64(v.Round))
	}
}

func (e *encoder) vote(v *Vote) {
	var m mask
	m.set(0, v.Actor != "")
	m.set(1, v.Option != "")
	m.set(2, !v.At.IsZero())
	m.set(3, v.Why != "")
	m.set(4, v.Digest != "")
	m.set(5, v.Evidence != "")
	m.set(6, v.Groups != nil)
	e.uvarint(uint64(m))
	if m.has(0) {
		e.str(v.Actor)
	}
	if m.has(1) {
		e.str(v.Option)
	}
	if m.has(2) {
		e.time(v.At)
	}
	if m.has(3) {
		e.str(v.Why)
	}
	if m.has(4) {
		e.str(v.Digest)
	}
	if m.has(5) {
		e.str(v.Evidence)
	}
	if m.has(6) {
		e.strs(v.Groups)
	}
}

func (e *encoder) decision(d *Decision) {
	var m mask
	m.set(0, len(d.Kind) > 0) // (a Kind is compared with constants only)
	m.set(1, d.Actor != "")
	m.set(2, !d.At.IsZero())
	m.set(3, d.Option != "")
	m.set(4, d.Reason != "")
	m.set(5, d.Text != "")
	m.set(6, d.Why != "")
	m.set(7, d.Policy != "")
	m.set(8, d.Groups != nil)
	m.set(9, d.Via != "")
	m.set(10, d.Link != "")
	m.set(11, d.Field != "")
	m.set(12, d.Value != "")
	m.set(13, d.Before != "")
	e.uvarint(uint64(m))
	for i, s := range [...]string{string(d.Kind), d.Actor} {
		if m.has(uint(i)) {
			e.str(s)
		}
	}
	if m.has(2) {
		e.time(d.At)
	}
	for i, s := range [...]string{d.Option, d.Reason, d.Text, d.Why, d.Policy} {
		if m.has(uint(3 + i)) {
			e.str(s)
		}
	}
	if m.has(8) {
		e.strs(d.Groups)
	}
	for i, s := range [...]string{d.Via, d.Link, d.Field, d.Value, d.Before} {
		if m.has(uint(9 + i)) {
			e.str(s)
		}
	}
}

// --- decoder ---

// decoder reads what encoder wrote. It never panics on bad input: the
// first problem is kept in err, and every read after it yields zeros.
type decoder struct {
	b       []byte
	err     error
	base    int64
	hasBase bool
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadEncoding, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a varint that must fit an int.
func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail("integer out of range")
		return 0
	}
	return int(v)
}

func (d *decoder) take(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail("length %d beyond the end", n)
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string {
	v := d.uvarint()
	if v == 1 {
		p := d.take(32)
		if p == nil {
			return ""
		}
		return freshness.Unpack(p)
	}
	if v&1 != 0 {
		if i := (v - 3) >> 1; i < uint64(len(commonStrings)) {
			return commonStrings[i]
		}
		d.fail("bad string tag %d", v)
		return ""
	}
	return string(d.take(v >> 1))
}

func (d *decoder) raw() []byte {
	v := d.uvarint()
	if v == 0 {
		return nil
	}
	p := d.take(v - 1)
	if d.err != nil {
		return nil
	}
	return slices.Clone(p) // never alias the input
}

// count reads a collection's length; each element takes at least one
// byte, so a count beyond the bytes left is damage, not a huge allocation.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("count %d beyond the end", n)
		return 0
	}
	return int(n)
}

func (d *decoder) strs() []string {
	n := d.count()
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func (d *decoder) strMap() map[string]string {
	n := d.count()
	out := make(map[string]string, n)
	for range n {
		k := d.str()
		out[k] = d.str()
	}
	return out
}

func (d *decoder) mask(fields uint) mask {
	m := mask(d.uvarint())
	if m>>fields != 0 {
		d.fail("unknown fields in mask %#x", uint64(m))
	}
	return m
}

// ptrMask reads a map value's mask: ok is false for a nil pointer.
func (d *decoder) ptrMask(fields uint) (mask, bool) {
	v := d.uvarint()
	if v == 0 {
		return 0, false
	}
	if v&1 == 0 || (v>>1)>>fields != 0 {
		d.fail("bad record mask %#x", v)
		return 0, false
	}
	return mask(v >> 1), true
}

func (d *decoder) time() time.Time {
	v := d.uvarint()
	switch v & 3 {
	case 0:
		if !d.hasBase {
			d.fail("a relative time without a base")
			return time.Time{}
		}
		z := v >> 2
		delta := int64(z>>1) ^ -int64(z&1)
		return time.Unix(0, d.base+delta).UTC()
	case 1, 2:
		if v>>2 != 0 {
			d.fail("bad time tag %d", v)
			return time.Time{}
		}
		sec, nsec := d.varint(), d.uvarint()
		if nsec >= 1e9 {
			d.fail("nanoseconds %d", nsec)
			return time.Time{}
		}
		t := time.Unix(sec, int64(nsec))
		if v == 1 {
			return t.UTC()
		}
		off := d.varint()
		name := d.str()
		if off < math.MinInt32 || off > math.MaxInt32 {
			d.fail("zone offset %d", off)
			return time.Time{}
		}
		return t.In(time.FixedZone(name, int(off)))
	}
	d.fail("bad time tag %d", v)
	return time.Time{}
}

func (d *decoder) run(r *Run) {
	m := d.mask(18)
	if m.has(0) {
		r.CreatedAt = d.time()
		d.base, d.hasBase = baseOf(r.CreatedAt)
	}
	if m.has(1) {
		r.ID = d.str()
	}
	if m.has(2) {
		r.PlanDigest = d.str()
	}
	if m.has(3) {
		r.Requester = d.str()
	}
	if m.has(4) {
		r.State = State(d.str())
	}
	if m.has(5) {
		r.Reason = d.str()
	}
	if m.has(6) {
		r.Version = d.varint()
	}
	if m.has(7) {
		r.UpdatedAt = d.time()
	}
	if m.has(8) {
		r.Phases = d.strs()
	}
	if m.has(9) {
		n := d.count()
		r.Steps = make(map[string]*StepRun, n)
		for range n {
			k := d.str()
			r.Steps[k] = d.step()
		}
	}
	if m.has(10) {
		n := d.count()
		r.Asks = make(map[string]*AskRun, n)
		for range n {
			k := d.str()
			r.Asks[k] = d.ask()
		}
	}
	if m.has(11) {
		r.Failing = d.str()
	}
	r.External = m.has(12)
	if m.has(13) {
		r.Inputs = d.strMap()
	}
	if m.has(14) {
		r.Origin = d.origin()
	}
	if m.has(15) {
		r.Parks = d.int()
	}
	if m.has(16) {
		r.ParkedAt = d.time()
	}
	if m.has(17) {
		r.ResumedAt = d.time()
	}
}

func (d *decoder) origin() Origin {
	var o Origin
	m := d.mask(4)
	if m.has(0) {
		o.Skill = d.str()
	}
	if m.has(1) {
		o.SkillVersion = d.varint()
	}
	if m.has(2) {
		o.Schedule = d.str()
	}
	if m.has(3) {
		o.Tick = d.time()
	}
	return o
}

func (d *decoder) step() *StepRun {
	m, ok := d.ptrMask(7)
	if !ok {
		return nil
	}
	s := &StepRun{}
	if m.has(0) {
		s.Status = StepStatus(d.str())
	}
	if m.has(1) {
		s.Attempt = d.int()
	}
	if m.has(2) {
		n := d.count()
		s.Attempts = make([]Attempt, n)
		for i := range s.Attempts {
			d.attempt(&s.Attempts[i])
		}
	}
	if m.has(3) {
		s.Output = d.raw()
	}
	if m.has(4) {
		s.Error = d.str()
	}
	if m.has(5) {
		s.Grant = d.str()
	}
	s.Blocked = m.has(6)
	return s
}

func (d *decoder) attempt(a *Attempt) {
	m := d.mask(9)
	if m.has(0) {
		a.N = d.int()
	}
	if m.has(1) {
		a.Executor = d.str()
	}
	if m.has(2) {
		a.LeaseID = d.str()
	}
	if m.has(3) {
		a.Replica = d.str()
	}
	if m.has(4) {
		a.QueuedAt = d.time()
	}
	if m.has(5) {
		a.LeasedAt = d.time()
	}
	if m.has(6) {
		a.StartedAt = d.time()
	}
	if m.has(7) {
		a.FinishedAt = d.time()
	}
	if m.has(8) {
		a.Error = d.str()
	}
}

func (d *decoder) ask() *AskRun {
	m, ok := d.ptrMask(askFields)
	if !ok {
		return nil
	}
	a := &AskRun{}
	if m.has(0) {
		a.ID = d.str()
	}
	if m.has(1) {
		a.Type = plan.StopType(d.str())
	}
	if m.has(2) {
		a.Title = d.str()
	}
	if m.has(3) {
		a.Audience = d.str()
	}
	if m.has(4) {
		a.State = AskState(d.str())
	}
	if m.has(5) {
		a.OpenedAt = d.time()
	}
	if m.has(6) {
		a.ExpiresAt = d.time()
	}
	if m.has(7) {
		a.Options = make([]plan.Option, d.count())
		for i := range a.Options {
			d.option(&a.Options[i])
		}
	}
	if m.has(8) {
		a.Payload = make([]Payload, d.count())
		for i := range a.Payload {
			d.payload(&a.Payload[i])
		}
	}
	if m.has(9) {
		a.Quorum = d.int()
	}
	if m.has(10) {
		a.Step = d.str()
	}
	if m.has(11) {
		a.Summary = d.str()
	}
	a.Added = m.has(12)
	if m.has(13) {
		a.OnExpiry = d.str()
	}
	if m.has(14) {
		a.Also = d.strs()
	}
	if m.has(15) {
		a.Option = d.str()
	}
	if m.has(16) {
		a.Label = d.str()
	}
	if m.has(17) {
		a.Text = d.str()
	}
	if m.has(18) {
		a.Misses = d.int()
	}
	if m.has(19) {
		a.Decisions = make([]Decision, d.count())
		for i := range a.Decisions {
			d.decision(&a.Decisions[i])
		}
	}
	if m.has(20) {
		a.Approvers = d.strs()
	}
	if m.has(21) {
		a.Votes = make([]Vote, d.count())
		for i := range a.Votes {
			d.vote(&a.Votes[i])
		}
	}
	if m.has(22) {
		a.Amend = make([]plan.AmendBound, d.count())
		for i := range a.Amend {
			a.Amend[i] = plan.AmendBound{Field: d.str(), Min: d.varint(), Max: d.varint()}
		}
	}
	a.HasCheck = m.has(23)
	if m.has(24) {
		a.RemindAt = d.time()
	}
	a.Reminded = m.has(25)
	if m.has(26) {
		a.EscalateAt = d.time()
	}
	if m.has(27) {
		a.EscalateTo = d.str()
	}
	if m.has(28) {
		a.EscalatedTo = d.str()
	}
	if m.has(29) {
		a.EscalatedFrom = d.str()
	}
	if m.has(30) {
		a.Evidence = make([]Evidence, d.count())
		for i := range a.Evidence {
			d.evidence(&a.Evidence[i])
		}
	}
	if m.has(31) {
		a.EvidenceRounds = d.int()
	}
	if m.has(32) {
		a.EvidenceWanted = d.str()
	}
	if m.has(33) {
		a.Delegations = make([]Delegation, d.count())
		for i := range a.Delegations {
			a.Delegations[i] = Delegation{From: d.str(), To: d.str(), At: d.time(), Reason: d.str()}
		}
	}
	if m.has(34) {
		a.Material = d.strMap()
	}
	if m.has(35) {
		a.ResourceVersion = d.str()
	}
	if m.has(36) {
		a.FactsError = d.str()
	}
	a.Verifying = m.has(37)
	if m.has(38) {
		a.VerifyAttempt = d.int()
	}
	if m.has(39) {
		a.Round = d.int()
	}
	if m.has(40) {
		a.Stale = d.str()
	}
	if m.has(41) {
		a.Closed = d.time()
	}
	return a
}

func (d *decoder) option(o *plan.Option) {
	m := d.mask(4)
	if m.has(0) {
		o.ID = d.str()
	}
	if m.has(1) {
		o.Label = d.str()
	}
	if m.has(2) {
		if err := json.Unmarshal(d.raw(), &o.Steps); err != nil {
			d.fail("an option's steps: %v", err)
		}
	}
	if m.has(3) {
		if err := json.Unmarshal(d.raw(), &o.StoppingPoints); err != nil {
			d.fail("an option's stopping points: %v", err)
		}
	}
}

func (d *decoder) payload(p *Payload) {
	m := d.mask(5)
	if m.has(0) {
		p.Step = d.str()
	}
	if m.has(1) {
		p.Server = d.str()
	}
	if m.has(2) {
		p.Tool = d.str()
	}
	if m.has(3) {
		p.Args = d.raw()
	}
	if m.has(4) {
		p.Digest = d.str()
	}
}

func (d *decoder) evidence(v *Evidence) {
	m := d.mask(7)
	if m.has(0) {
		v.Ref = d.str()
	}
	if m.has(1) {
		v.Name = d.str()
	}
	if m.has(2) {
		v.MediaType = d.str()
	}
	if m.has(3) {
		v.Content = d.raw()
	}
	if m.has(4) {
		v.Digest = d.str()
	}
	if m.has(5) {
		v.AttachedBy = d.str()
	}
	if m.has(6) {
		v.Round = d.int()
	}
}

func (d *decoder) vote(v *Vote) {
	m := d.mask(7)
	if m.has(0) {
		v.Actor = d.str()
	}
	if m.has(1) {
		v.Option = d.str()
	}
	if m.has(2) {
		v.At = d.time()
	}
	if m.has(3) {
		v.Why = d.str()
	}
	if m.has(4) {
		v.Digest = d.str()
	}
	if m.has(5) {
		v.Evidence = d.str()
	}
	if m.has(6) {
		v.Groups = d.strs()
	}
}

func (d *decoder) decision(x *Decision) {
	m := d.mask(14)
	if m.has(0) {
		x.Kind = DecisionKind(d.str())
	}
	if m.has(1) {
		x.Actor = d.str()
	}
	if m.has(2) {
		x.At = d.time()
	}
	for i, p := range [...]*string{&x.Option, &x.Reason, &x.Text, &x.Why, &x.Policy} {
		if m.has(uint(3 + i)) {
			*p = d.str()
		}
	}
	if m.has(8) {
		x.Groups = d.strs()
	}
	for i, p := range [...]*string{&x.Via, &x.Link, &x.Field, &x.Value, &x.Before} {
		if m.has(uint(9 + i)) {
			*p = d.str()
		}
	}
}

// commonStrings are values runs hold over and over (states, statuses,
// types, option ids and labels), each written as one byte: its index.
// Stored runs name them by index, so the list only ever grows at the end.
var commonStrings = [...]string{
	"running", "parked", "blocked", "complete", "partial", "failed", "cancelled", "rejected", "expired",
	"waiting", "queued", "leased", "started", "succeeded", "in_doubt",
	"pending", "approved", "consumed", "answered", "stale", "evidence_requested",
	"menu", "choice", "text", "gate",
	"approve", "reject", "answer", "amend", "revoke", "request_evidence", "evidence", "delegate", "escalate", "expire", "cancel",
	"me", "start", "system", "1", "2", "3", "Yes", "No", "Approve",
}

var commonIndex = func() map[string]int {
	m := make(map[string]int, len(commonStrings))
	for i, s := range commonStrings {
		if _, ok := m[s]; !ok {
			m[s] = i
		}
	}
	return m
}()
