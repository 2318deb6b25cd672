package redisstore

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
)

// A run is one string key (runKey) holding, in this order:
//
//	fixed header (headerLen bytes; the commit script reads it by offset)
//	  0  format byte, runFormat
//	  1  version, uint64 big-endian
//	  9  journal seq (of the last record), uint64 big-endian
//	  17 journal head: 0 and 32 zero bytes for none, 1 and the 32 bytes of
//	     a "sha256:" digest
//	  50 data offset, uint32 big-endian: where the meta ends
//	  54 tail offset, uint32 big-endian: where the journal tail starts
//	meta: the run's other fields and every ask of the run (below)
//	data: store.Run.Data, as given, or the bytes a JSON string of standard
//	      base64 encodes (engine.EncodeStored's form), given back as that
//	      string
//	journal tail: the records not yet moved to the journal list
//	      (journal.go)
//
// Meta, in order: flags (uvarint; bit 0: data is the base64 of Data's
// JSON string; bit 1 below), state, requester, skill, plan digest, created, updated,
// the journal's base (the seq before its first record, usually 0), first
// prev hash (usually ""), with flag bit 1 digest (else it is the plan
// digest: journal.go) and with flag bit 2 epoch (else it is created),
// then the asks: a count and, each, its
// stop (the id after "RUN/"; or, flag bit 1, the whole id of an ask not
// so named), flags (bit 0: requester is the run's), title, state,
// audience, [requester], created and due. Strings are uvarint(2·len) and
// the bytes, 1 and 32 bytes for a "sha256:" digest of 64 lowercase hex
// digits, or 2·i+3 for the i-th of commonStrings; times are 0 for the zero time, else
// zigzag(nanoseconds − base)+1 as a uvarint, base 0 for created and
// created for the others.
//
// A reader of a listing or an ask reads the header and meta alone
// (GETRANGE, headRead bytes and then the rest if the meta is longer).
const (
	runFormat  = 2
	offVersion = 1
	offSeq     = 9
	offHead    = 17
	offData    = 50
	offTail    = 54
	headerLen  = 58

	headRead = 512 // bytes a listing reads first; most runs' meta fits
)

// Meta flags.
const (
	dataIsB64        = 1 << 0 // data is the base64 of Data's JSON string
	ownJournalDigest = 1 << 1 // the journal's digest follows: not the plan digest
	ownJournalEpoch  = 1 << 2 // the journal's epoch follows: not the run's creation
)

// An ask's flags in the meta.
const (
	askSameRequester = 1 << 0 // its requester is the run's (not written)
	askWholeID       = 1 << 1 // its id is written whole: not RUN/STOP
)

// askStop is the stop of an ask named RUN/STOP after its run, STOP with
// no "/". Only such an id says which run holds the ask; the store
// records the run of any other in the shard's odd-ask hash (oddAsksKey).
func askStop(runID, askID string) (string, bool) {
	stop, ok := strings.CutPrefix(askID, runID+"/")
	return stop, ok && stop != "" && !strings.Contains(stop, "/")
}

// runOfAsk is the run an ask named RUN/STOP belongs to, if id is so
// named.
func runOfAsk(id string) (string, bool) {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 || i == len(id)-1 {
		return "", false
	}
	return id[:i], true
}

var strictB64 = base64.StdEncoding.Strict()

// packRun is the part of a run's value Go writes at each commit: the
// header, the meta and the data. The commit script appends the journal
// tail.
func packRun(r store.Run, asks []store.Ask, base int64, firstPrev, journalDigest string, epoch time.Time) ([]byte, error) {
	for _, a := range asks {
		if a.RunID != r.ID {
			return nil, fmt.Errorf("%w: ask %q does not belong to run %s", store.ErrInvalid, a.ID, r.ID)
		}
	}
	data := r.Data
	flags := uint64(0)
	if raw, ok := unwrapB64(data); ok {
		data, flags = raw, dataIsB64
	}
	b := make([]byte, headerLen, headerLen+64+len(r.State)+len(r.Requester)+len(r.Skill)+len(asks)*96+len(data))
	b[0] = runFormat
	binary.BigEndian.PutUint64(b[offVersion:], uint64(r.Version))
	binary.BigEndian.PutUint64(b[offSeq:], uint64(r.JournalSeq))
	head, ok := packHead(r.JournalHead)
	if !ok {
		return nil, fmt.Errorf("%w: journal head %q is not a sha256 digest", store.ErrInvalid, r.JournalHead)
	}
	copy(b[offHead:], head[:])
	if journalDigest != r.PlanDigest {
		flags |= ownJournalDigest
	}
	if !epoch.Equal(r.CreatedAt) {
		flags |= ownJournalEpoch
	}
	b = binary.AppendUvarint(b, flags)
	b = appendStr(b, r.State)
	b = appendStr(b, r.Requester)
	b = appendStr(b, r.Skill)
	b = appendStr(b, r.PlanDigest)
	b = appendTime(b, r.CreatedAt, 0)
	created := timeBase(r.CreatedAt)
	b = appendTime(b, r.UpdatedAt, created)
	b = binary.AppendUvarint(b, uint64(base))
	b = appendStr(b, firstPrev)
	if flags&ownJournalDigest != 0 {
		b = appendStr(b, journalDigest)
	}
	if flags&ownJournalEpoch != 0 {
		b = appendTime(b, epoch, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(asks)))
	for _, a := range asks {
		stop, named := askStop(r.ID, a.ID)
		same := a.Requester == r.Requester
		flags := byte(0)
		if same {
			flags |= askSameRequester
		}
		if !named {
			flags |= askWholeID
			stop = a.ID
		}
		b = appendStr(b, stop)
		b = append(b, flags)
		b = appendStr(b, a.Title)
		b = appendStr(b, a.State)
		b = appendStr(b, a.Audience)
		if !same {
			b = appendStr(b, a.Requester)
		}
		b = appendTime(b, a.CreatedAt, created)
		b = appendTime(b, a.DueAt, created)
	}
	if len(b)+len(data) > 1<<31 {
		return nil, fmt.Errorf("%w: run %s is too large to store", store.ErrInvalid, r.ID)
	}
	binary.BigEndian.PutUint32(b[offData:], uint32(len(b)))
	b = append(b, data...)
	binary.BigEndian.PutUint32(b[offTail:], uint32(len(b)))
	return b, nil
}

// runHead is a run's header and meta, decoded.
type runHead struct {
	run       store.Run // without Data
	asks      []store.Ask
	base      int64  // the journal's seq before its first record
	firstPrev string // the first record's prev hash
	// journalDigest is the run's plan digest when its journal began, which
	// packed payloads refer to (packPayload); epoch is its creation then,
	// which records' times are written from.
	journalDigest string
	epoch         time.Time
	b64           bool // data is kept decoded from base64
	dataAt        int  // offsets in the value
	tailAt        int
}

// headLen is how many bytes of a value hold its header and meta, from
// its first headerLen bytes (0 if they are not a run's).
func headLen(v string) int {
	if len(v) < headerLen || v[0] != runFormat {
		return 0
	}
	return int(binary.BigEndian.Uint32([]byte(v[offData : offData+4])))
}

// decodeHead decodes a run's header and meta from the start of its value
// (at least headLen bytes of it).
func decodeHead(id, v string) (runHead, error) {
	bad := func(what string) (runHead, error) {
		return runHead{}, fmt.Errorf("redisstore: run %s is damaged: %s", id, what)
	}
	if len(v) < headerLen || v[0] != runFormat {
		return bad("not a run of this store's format")
	}
	h := runHead{run: store.Run{ID: id}}
	h.run.Version = int64(binary.BigEndian.Uint64([]byte(v[offVersion:])))
	h.run.JournalSeq = int64(binary.BigEndian.Uint64([]byte(v[offSeq:])))
	h.run.JournalHead = unpackHead(v[offHead : offHead+33])
	h.dataAt = int(binary.BigEndian.Uint32([]byte(v[offData:])))
	h.tailAt = int(binary.BigEndian.Uint32([]byte(v[offTail:])))
	if h.dataAt < headerLen || h.tailAt < h.dataAt || h.dataAt > len(v) {
		return bad("offsets")
	}
	r := reader{s: v[headerLen:h.dataAt]}
	flags := r.uvarint()
	h.b64 = flags&dataIsB64 != 0
	h.run.State = r.str()
	h.run.Requester = r.str()
	h.run.Skill = r.str()
	h.run.PlanDigest = r.str()
	h.run.CreatedAt = r.time(0)
	created := timeBase(h.run.CreatedAt)
	h.run.UpdatedAt = r.time(created)
	h.base = int64(r.uvarint())
	h.firstPrev = r.str()
	h.journalDigest = h.run.PlanDigest
	if flags&ownJournalDigest != 0 {
		h.journalDigest = r.str()
	}
	h.epoch = h.run.CreatedAt
	if flags&ownJournalEpoch != 0 {
		h.epoch = r.time(0)
	}
	n := r.count()
	h.asks = make([]store.Ask, 0, n)
	for range n {
		a := store.Ask{RunID: id}
		stop := r.str()
		flags := r.byte()
		same := flags&askSameRequester != 0
		if a.ID = id + "/" + stop; flags&askWholeID != 0 {
			a.ID = stop
		}
		a.Title = r.str()
		a.State = r.str()
		a.Audience = r.str()
		a.Requester = h.run.Requester
		if !same {
			a.Requester = r.str()
		}
		a.CreatedAt = r.time(created)
		a.DueAt = r.time(created)
		h.asks = append(h.asks, a)
	}
	if r.err != nil || len(r.s) != 0 {
		return bad("meta")
	}
	return h, nil
}

// decodeRun is the one decoder of a run's stored value (GET of runKey)
// into a store.Run, Data included.
func decodeRun(id, v string) (store.Run, error) {
	h, err := decodeHead(id, v)
	if err != nil {
		return store.Run{}, err
	}
	if h.tailAt > len(v) {
		return store.Run{}, fmt.Errorf("redisstore: run %s is damaged: offsets", id)
	}
	r := h.run
	if data := v[h.dataAt:h.tailAt]; h.b64 {
		r.Data = wrapB64(data)
	} else if data != "" {
		r.Data = []byte(data)
	}
	return r, nil
}

// unwrapB64 is what a JSON string of strict standard base64 encodes, if
// data is exactly such a string (so wrapB64 gives data back).
func unwrapB64(data []byte) ([]byte, bool) {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return nil, false
	}
	body := data[1 : len(data)-1]
	if len(body)%4 != 0 {
		return nil, false // Decode would skip \r and \n: the length says there are none
	}
	raw := make([]byte, strictB64.DecodedLen(len(body)))
	n, err := strictB64.Decode(raw, body)
	if err != nil || strictB64.EncodedLen(n) != len(body) {
		return nil, false
	}
	return raw[:n], true
}

func wrapB64(raw string) []byte {
	out := make([]byte, strictB64.EncodedLen(len(raw))+2)
	out[0] = '"'
	strictB64.Encode(out[1:], []byte(raw))
	out[len(out)-1] = '"'
	return out
}

// --- strings, digests and times ---

// packHead is a journal head as the header keeps it: 33 bytes, the first
// 0 for none and 1 for a digest (every hash of a chain is one).
func packHead(h string) ([33]byte, bool) {
	var out [33]byte
	if h == "" {
		return out, true
	}
	d, ok := freshness.Pack(h)
	out[0] = 1
	copy(out[1:], d[:])
	return out, ok
}

func unpackHead(p string) string {
	if p[0] == 0 {
		return ""
	}
	return freshness.Unpack(p[1:])
}

// commonStrings are values the meta and journal hold over and over (run
// and ask states, the engine's actor), each written as one byte: its
// index. Stored values name them by index: the list only grows at the
// end.
var commonStrings = [...]string{
	"running", "parked", "blocked", "complete", "partial", "failed", "cancelled", "rejected", "expired",
	"pending", "approved", "consumed", "answered", "stale", "evidence_requested", "system",
}

var commonIndex = func() map[string]int {
	m := make(map[string]int, len(commonStrings))
	for i, s := range commonStrings {
		m[s] = i
	}
	return m
}()

func appendStr(b []byte, s string) []byte {
	if i, ok := commonIndex[s]; ok {
		return binary.AppendUvarint(b, uint64(i)<<1+3)
	}
	if d, ok := freshness.Pack(s); ok {
		b = append(b, 1)
		return append(b, d[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(s))<<1)
	return append(b, s...)
}

// timeBase is what times of a run are kept relative to: its creation.
func timeBase(created time.Time) int64 {
	if created.IsZero() {
		return 0
	}
	return created.UnixNano()
}

func appendTime(b []byte, t time.Time, base int64) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	d := t.UnixNano() - base
	return binary.AppendUvarint(b, (uint64(d<<1)^uint64(d>>63))+1)
}

// reader reads what the append functions wrote; the first problem is
// kept in err and every read after it yields zeros.
type reader struct {
	s   string
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("damaged")
	}
	r.s = ""
}

func (r *reader) uvarint() uint64 {
	var v uint64
	for i := 0; i < len(r.s) && i < binary.MaxVarintLen64; i++ {
		c := r.s[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.s = r.s[i+1:]
			return v
		}
	}
	r.fail()
	return 0
}

func (r *reader) byte() byte {
	if len(r.s) == 0 {
		r.fail()
		return 0
	}
	c := r.s[0]
	r.s = r.s[1:]
	return c
}

func (r *reader) take(n uint64) string {
	if n > uint64(len(r.s)) {
		r.fail()
		return ""
	}
	p := r.s[:n]
	r.s = r.s[n:]
	return p
}

func (r *reader) str() string {
	v := r.uvarint()
	switch {
	case v == 1:
		p := r.take(32)
		if r.err != nil {
			return ""
		}
		return freshness.Unpack(p)
	case v&1 != 0:
		if i := (v - 3) >> 1; i < uint64(len(commonStrings)) {
			return commonStrings[i]
		}
		r.fail()
		return ""
	}
	return strings.Clone(r.take(v >> 1))
}

func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.s)) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *reader) time(base int64) time.Time {
	v := r.uvarint()
	if v == 0 {
		return time.Time{}
	}
	v--
	d := int64(v>>1) ^ -int64(v&1)
	return time.Unix(0, base+d).UTC()
}
