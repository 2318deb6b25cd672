package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
)

// growJournal commits n transitions of run id, each with k records whose
// payloads hold digests, times and keys packPayload packs (and text it
// does not), and returns every record committed.
func growJournal(t *testing.T, s *Store, id string, n, k int) (store.Run, []store.JournalRecord) {
	t.Helper()
	c := storetest.Commit(newRun(id, "alice", base), 0, "running", nil, "run.started")
	c.Journal[0].Payload = json.RawMessage(`{"plan_digest":"sha256:abc"}`)
	c.Run.JournalSeq, c.Run.JournalHead = store.Chain(id, 0, "", c.Journal)
	must(t, s.Commit(ctx, c))
	all := slices.Clone(c.Journal)
	prev := c.Run
	for v := range n {
		var kinds []string
		for j := range k {
			kinds = append(kinds, []string{"step.succeeded", "ask.opened", "custom.kind"}[(v+j)%3])
		}
		c := storetest.Commit(prev, prev.Version, "running", nil, kinds...)
		for j := range c.Journal {
			c.Journal[j].Actor = fmt.Sprintf("actor-%04d", v*k+j)
			c.Journal[j].Payload = json.RawMessage(fmt.Sprintf(`{"ask":"a%d","digest":"sha256:%064x","expires_at":%q,"note":"n\"%d"}`,
				j, v*k+j, base.Add(time.Duration(v)*time.Hour+time.Duration(j)).Format(time.RFC3339Nano), j))
		}
		c.Run.JournalSeq, c.Run.JournalHead = store.Chain(id, prev.JournalSeq, prev.JournalHead, c.Journal)
		must(t, s.Commit(ctx, c))
		all = append(all, c.Journal...)
		prev = c.Run
	}
	return prev, all
}

// A long journal moves from the run's value to the journal list in
// pieces; read whole or by pages it is every record as committed, and its
// chain holds.
func TestJournalSpillsAndPages(t *testing.T) {
	s, _ := newStore(t, Config{})
	run, want := growJournal(t, s, "long", 60, 3)
	tag := s.runTag("long")
	chunks, err := s.rdb.LLen(ctx, journalKey(tag, "long")).Result()
	must(t, err)
	if chunks < 3 {
		t.Fatalf("%d records in %d list elements: the tail did not spill", len(want), chunks)
	}
	got, err := s.Journal(ctx, "long", 0, 0)
	must(t, err)
	sameRecords(t, got, want)
	if seq, err := store.VerifyChain(got); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
	if got[len(got)-1].Hash != run.JournalHead {
		t.Fatal("the last record is not the head")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		after, limit := rng.IntN(len(want)+3), rng.IntN(12)
		page, err := s.Journal(ctx, "long", int64(after), limit)
		must(t, err)
		end := len(want)
		if limit > 0 {
			end = min(end, after+limit)
		}
		if after >= len(want) {
			if len(page) != 0 {
				t.Fatalf("after %d: %d records", after, len(page))
			}
			continue
		}
		sameRecords(t, page, want[after:end])
	}
	// The value holds the tail only: its size does not grow with the
	// journal.
	n, err := s.rdb.StrLen(ctx, runKey(tag, "long")).Result()
	must(t, err)
	if n > 4096 {
		t.Fatalf("the run's value is %d bytes", n)
	}
}

// A record changed in Redis (in the tail, or in the list) breaks the
// chain the audit checks, at its group's last record at the latest.
func TestJournalTamperingIsDetected(t *testing.T) {
	for _, where := range []string{"tail", "list"} {
		t.Run(where, func(t *testing.T) {
			s, _ := newStore(t, Config{})
			_, want := growJournal(t, s, "r1", 40, 3)
			tag := s.runTag("r1")
			key := runKey(tag, "r1")
			target := want[len(want)-5] // in the tail: the last groups
			if where == "list" {
				target = want[4]
			}
			var v string
			var err error
			if where == "tail" {
				v, err = s.rdb.Get(ctx, key).Result()
			} else {
				v, err = s.rdb.LIndex(ctx, journalKey(tag, "r1"), 0).Result()
			}
			must(t, err)
			at := strings.Index(v, target.Actor)
			if at < 0 || strings.Count(v, target.Actor) != 1 {
				t.Fatalf("actor %s is not once in the %s", target.Actor, where)
			}
			forged := v[:at] + "mallory-01" + v[at+len(target.Actor):]
			if where == "tail" {
				must(t, s.rdb.Set(ctx, key, forged, 0).Err())
			} else {
				must(t, s.rdb.LSet(ctx, journalKey(tag, "r1"), 0, forged).Err())
			}
			got, err := s.Journal(ctx, "r1", 0, 0)
			must(t, err)
			if got[target.Seq-1].Actor != "mallory-01" {
				t.Fatal("the forged record did not read back forged")
			}
			seq, err := store.VerifyChain(got)
			if err == nil {
				t.Fatal("a forged record passes the chain")
			}
			// The group (one commit's records) that holds it ends at
			// most 2 records later.
			if seq < target.Seq || seq > target.Seq+2 {
				t.Fatalf("forged record %d reported at %d: %v", target.Seq, seq, err)
			}
		})
	}
}

func TestPayloadPacking(t *testing.T) {
	const run = "sha256:6a21d671b9150cf4890bb8f61fc711dc7544657156ff99913e34c8f88236ba11"
	for _, tc := range []struct {
		in     string
		packed bool
	}{
		{`{"plan_digest":"` + run + `"}`, true},
		{`{"ask":"ask_1","digest":"sha256:545c3b9e01216a43cd55fdace617841aa437404f86af51abf28ecd75f14df222","expires_at":"2026-12-07T00:31:19.801530132Z","round":0,"title":"go ahead?"}`, true},
		{`{"from":"running","to":"parked"}`, true},
		{`{"t":"2026-12-07T00:31:19.8015301Z","u":"2026-12-07T00:31:19.801530100Z"}`, true}, // u is not how RFC 3339 nano writes it: kept as text
		{`{"ask":"x\"y","to":1}`, true},
		{"{\"a\":\"\x01\"}", false}, // a control byte: never packed
		{`"sha256:ABCDEF"`, false},
		{``, false},
		{`not json "to": at all`, true},
	} {
		p, ok := packPayload([]byte(tc.in), run)
		if ok != tc.packed {
			t.Errorf("%q: packed %v, want %v", tc.in, ok, tc.packed)
		}
		if !ok {
			continue
		}
		if len(p) >= len(tc.in) {
			t.Errorf("%q: packed to %d bytes from %d", tc.in, len(p), len(tc.in))
		}
		back, err := unpackPayload(string(p), run)
		if err != nil || string(back) != tc.in {
			t.Errorf("%q came back as %q (%v)", tc.in, back, err)
		}
	}
}

// FuzzPayloadPacking: whatever packs unpacks to the same bytes.
func FuzzPayloadPacking(f *testing.F) {
	f.Add([]byte(`{"ask":"ask_1","digest":"sha256:545c3b9e01216a43cd55fdace617841aa437404f86af51abf28ecd75f14df222","expires_at":"2026-12-07T00:31:19.801530132Z"}`), "sha256:x")
	f.Add([]byte(`{"to":"sha256:x","from":"\u00e9"}`), "sha256:x")
	f.Fuzz(func(t *testing.T, in []byte, digest string) {
		p, ok := packPayload(in, digest)
		if !ok {
			return
		}
		back, err := unpackPayload(string(p), digest)
		if err != nil || string(back) != string(in) {
			t.Fatalf("%q packed to %q came back as %q (%v)", in, p, back, err)
		}
	})
}

// FuzzRunValue: a run's value, whatever its bytes, decodes or is an
// error; a value packRun wrote decodes to the run and asks it was given.
func FuzzRunValue(f *testing.F) {
	f.Add("r1", "alice", "parked", []byte(`"AQID"`), "u/x", int64(3))
	f.Add("r/2", "", "", []byte(nil), "r/2/s", int64(-1))
	f.Fuzz(func(t *testing.T, id, requester, state string, data []byte, askID string, n int64) {
		r := store.Run{ID: id, Version: n, State: state, Requester: requester, PlanDigest: "sha256:" + strings.Repeat("0f", 32),
			CreatedAt: base.Add(time.Duration(n)), UpdatedAt: base.Add(time.Duration(n) * time.Second), Data: data}
		asks := []store.Ask{{ID: askID, RunID: id, Title: state, State: "pending", Audience: requester, Requester: requester,
			CreatedAt: base, DueAt: base.Add(time.Duration(n) * time.Minute)}}
		v, err := packRun(r, asks, n, "", r.PlanDigest, r.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRun(id, string(v))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			data = nil
		}
		got.Data, r.Data = nil, nil
		if fmt.Sprint(got) != fmt.Sprint(r) {
			t.Fatalf("run:\n got %+v\nwant %+v", got, r)
		}
		h, err := decodeHead(id, string(v))
		if err != nil || len(h.asks) != 1 || fmt.Sprint(h.asks[0]) != fmt.Sprint(asks[0]) || h.base != n {
			t.Fatalf("asks %+v, base %d: %v", h.asks, h.base, err)
		}
		// Damaged values are errors, not panics.
		for cut := range len(v) {
			_, _ = decodeRun(id, string(v[:cut]))
		}
		_, _ = decodeRun(id, string(data))
	})
}

// A run's Data that is a JSON string of base64 (engine.EncodeStored's
// form) is kept decoded, and any other bytes as they are; both read back
// exactly.
func TestDataKeptExactly(t *testing.T) {
	s, _ := newStore(t, Config{})
	for i, data := range []string{`"AQIDBA=="`, `"AQIDBA"`, `"AQID\nBA=="`, `"AQIDBB=="`, `{"v":1}`, `""`, `"`, ``, "\x00\xff"} {
		id := fmt.Sprintf("r%d", i)
		c := storetest.Commit(newRun(id, "alice", base), 0, "running", nil, "run.started")
		c.Run.Data = []byte(data)
		must(t, s.Commit(ctx, c))
		got, err := s.GetRun(ctx, id)
		must(t, err)
		if string(got.Data) != data {
			t.Errorf("%q read back as %q", data, got.Data)
		}
		v, err := s.rdb.Get(ctx, runKey(s.runTag(id), id)).Result()
		must(t, err)
		if unwrapped := strings.Contains(v, "\x01\x02\x03\x04"); unwrapped != (data == `"AQIDBA=="`) {
			t.Errorf("%q: kept decoded %v", data, unwrapped)
		}
	}
}

// Index buckets split as entries come and merge as they go, and the
// indexes stay exact: runs parked in order, then resumed in random order.
func TestIndexBucketsSplitAndMerge(t *testing.T) {
	s, _ := newStore(t, Config{Shards: 1, IndexBucket: 8})
	tag := s.tag(0)
	exp := base.Add(time.Hour)
	var runs []store.Run
	for i := range 120 {
		id := fmt.Sprintf("r%03d", i)
		c := storetest.Commit(newRun(id, "alice", base.Add(time.Duration(i)*time.Millisecond)), 0, "parked",
			[]store.Ask{newAsk(id, "a", "pending", "user:bob", exp.Add(time.Duration(119-i)*time.Millisecond))}, "run.started")
		must(t, s.Commit(ctx, c))
		runs = append(runs, c.Run)
	}
	buckets := func(dir string) int64 {
		n, err := s.rdb.ZCard(ctx, dir).Result()
		must(t, err)
		return n
	}
	parked := runStateKey(tag, "parked")
	if n := buckets(parked); n < 120/8 || n > 2*120/8+1 {
		t.Fatalf("120 entries in %d buckets of at most 8", n)
	}
	for _, dir := range allKeys(t, s, tag+":b:*") {
		if n, _ := s.rdb.ZCard(ctx, dir).Result(); n >= 8 {
			t.Fatalf("bucket %s holds %d entries", dir, n)
		}
	}
	checkIndexes(t, s)
	rng := rand.New(rand.NewPCG(3, 4))
	for i, j := range rng.Perm(len(runs)) {
		r := runs[j]
		c := storetest.Commit(r, 1, "running", []store.Ask{newAsk(r.ID, "a", "approved", "user:bob", exp.Add(time.Duration(119-j)*time.Millisecond))}, "ask.decided")
		must(t, s.Commit(ctx, c))
		if i%20 == 19 {
			checkIndexes(t, s)
			left := int64(len(runs) - i - 1)
			if n := buckets(parked); left > 0 && n > left/2+2 {
				t.Fatalf("%d entries left in %d buckets: sparse buckets do not merge", left, n)
			}
		}
	}
	if n, _ := s.rdb.Exists(ctx, parked).Result(); n != 0 {
		t.Fatal("the empty index's directory is still there")
	}
	page, _, err := s.ListRuns(ctx, store.RunQuery{States: []string{"running"}, Limit: 500})
	must(t, err)
	if len(page) != len(runs) || page[0].ID != "r119" || page[len(page)-1].ID != "r000" {
		t.Fatalf("running runs: %d, from %s", len(page), page[0].ID)
	}
}

// A commit whose slot is half-migrated between cluster nodes writes
// nothing and is unavailable, whether an index bucket (which the script
// finds, not declares) has moved before the run or after it; so is a read
// of that index; once the slot has moved, both work.
func TestBucketsOfAMovingSlot(t *testing.T) {
	for _, first := range []string{"bucket", "everything else"} {
		t.Run(first, func(t *testing.T) {
			c := redistest.StartCluster(t, 3)
			s := newClusterStore(t, c, Config{})
			defer s.Close()
			exp := base.Add(time.Hour)
			// A run whose journal has spilled to its list, in a shard
			// with odd asks and work: every key the commit declares is
			// there, so Redis runs the script (with one missing, it
			// answers TRYAGAIN for the whole command first).
			prev, _ := growJournal(t, s, "r1", 30, 3)
			c1 := storetest.Commit(prev, prev.Version, "parked", []store.Ask{newAsk("r1", "pay", "pending", "role:finance", exp)}, "ask.opened")
			c1.Enqueue = []store.Work{{Queue: "q", ID: "r1/w", RunID: "r1", Body: []byte("x")}, {Queue: "q2", ID: "r1/v", RunID: "r1", Owner: "cp"}}
			must(t, s.Commit(ctx, c1))
			tag := s.runTag("r1")
			must(t, s.rdb.HSet(ctx, oddAsksKey(tag), "odd", "r1").Err())
			// Another run of the shard already where c2 takes r1.
			other := "o0"
			for i := 1; s.runTag(other) != tag; i++ {
				other = fmt.Sprintf("o%d", i)
			}
			must(t, s.Commit(ctx, storetest.Commit(newRun(other, "alice", base), 0, "running",
				[]store.Ask{newAsk(other, "pay", "approved", "role:finance", exp)}, "run.started")))
			wk, wc, wb, wq := workKeys(tag)
			for _, k := range []string{journalKey(tag, "r1"), wk, wc, wb, wq} {
				if n, err := s.rdb.Exists(ctx, k).Result(); err != nil || n != 1 {
					t.Fatalf("%s is not there: %v", k, err)
				}
			}
			dir := askAudKey(tag, "role:finance", "pending")
			key := runKey(tag, "r1")
			from := ownerOf(t, c, key)
			b, err := c.Node(from).Do("ZRANGE", dir, "0", "0")
			must(t, err)
			bucket := bucketKey(tag, b)
			sl, err := c.Node(from).Do("CLUSTER", "KEYSLOT", key)
			must(t, err)
			m := startMigration(t, c, sl, from, (from+1)%c.Len())
			if first == "bucket" {
				m.move(bucket)
			} else {
				out, err := c.Node(from).Do("CLUSTER", "GETKEYSINSLOT", sl, "100000")
				must(t, err)
				var rest []string
				for _, k := range strings.Split(out, "\n") {
					if k != bucket {
						rest = append(rest, k)
					}
				}
				m.move(rest...)
			}
			c2 := storetest.Commit(c1.Run, c1.Run.Version, "running", []store.Ask{newAsk("r1", "pay", "approved", "role:finance", exp)}, "ask.decided")
			if err := s.Commit(ctx, c2); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("a commit while the slot moves: %v", err)
			}
			if _, _, err := s.ListAsks(ctx, store.AskQuery{States: []string{"pending"}, Audiences: []string{"role:finance"}}); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("a read of a moving index: %v", err)
			}
			m.finish()
			got, err := s.GetRun(ctx, "r1")
			must(t, err)
			sameRun(t, got, c1.Run)
			inbox, _, err := s.ListAsks(ctx, store.AskQuery{States: []string{"pending"}, Audiences: []string{"role:finance"}})
			must(t, err)
			if len(inbox) != 1 {
				t.Fatalf("after the move the inbox holds %d asks", len(inbox))
			}
			must(t, s.Commit(ctx, c2))
			checkIndexes(t, s)
		})
	}
}
