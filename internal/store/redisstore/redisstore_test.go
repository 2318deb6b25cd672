package redisstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
)

var ctx = context.Background()

var base = time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newRun(id, requester string, created time.Time) store.Run {
	return store.Run{ID: id, Requester: requester, Skill: "demo", PlanDigest: "sha256:abc", CreatedAt: created}
}

func newAsk(run, stop, state, audience string, expires time.Time) store.Ask {
	return store.Ask{ID: store.AskID(run, stop), RunID: run, Title: stop + "?", State: state, Audience: audience,
		Requester: "alice", CreatedAt: base, DueAt: expires}
}

func sameRun(t testing.TB, got, want store.Run) {
	t.Helper()
	if got.ID != want.ID || got.Version != want.Version || got.State != want.State || got.Requester != want.Requester ||
		got.Skill != want.Skill || got.PlanDigest != want.PlanDigest || !got.CreatedAt.Equal(want.CreatedAt) ||
		!got.UpdatedAt.Equal(want.UpdatedAt) || got.JournalSeq != want.JournalSeq || got.JournalHead != want.JournalHead ||
		string(got.Data) != string(want.Data) {
		t.Fatalf("run differs:\n got %+v\nwant %+v", got, want)
	}
}

func sameAsk(t testing.TB, got, want store.Ask) {
	t.Helper()
	if got.ID != want.ID || got.RunID != want.RunID || got.Title != want.Title || got.State != want.State ||
		got.Audience != want.Audience || got.Requester != want.Requester || !got.CreatedAt.Equal(want.CreatedAt) ||
		!got.DueAt.Equal(want.DueAt) {
		t.Fatalf("ask differs:\n got %+v\nwant %+v", got, want)
	}
}

func sameRecords(t testing.TB, got, want []store.JournalRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.RunID != w.RunID || g.Seq != w.Seq || !g.Time.Equal(w.Time) || g.Actor != w.Actor || g.Kind != w.Kind ||
			string(g.Payload) != string(w.Payload) || g.PrevHash != w.PrevHash || g.Hash != w.Hash {
			t.Fatalf("record %d differs:\n got %+v\nwant %+v", i+1, g, w)
		}
	}
}

// TestConformanceOnCluster runs the suite against a one-node Redis
// Cluster that owns every slot: Redis itself refuses any script or
// command whose keys span two slots.
func TestConformanceOnCluster(t *testing.T) {
	srv := redistest.Start(t, redistest.Cluster()) // one server: a cluster takes 2 s to turn writable
	storetest.Run(t, func(t *testing.T) store.Store {
		if _, err := srv.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		s, err := New(ctx, Config{URL: srv.URL()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestRefusesVolatileRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Volatile())
	_, err := New(ctx, Config{URL: srv.URL()})
	if err == nil {
		t.Fatal("a Redis without an append-only file was accepted")
	}
	for _, want := range []string{"appendonly", "--allow-volatile-store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	s, err := New(ctx, Config{URL: srv.URL(), AllowVolatile: true})
	must(t, err)
	defer s.Close()
	if s.Durability() != DurabilityVolatile {
		t.Fatalf("durability %q, want volatile", s.Durability())
	}
	must(t, s.Commit(ctx, storetest.Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")))
}

func TestDurabilityIsReported(t *testing.T) {
	s, _ := newStore(t, Config{})
	if s.Durability() != DurabilityAlways {
		t.Fatalf("durability %q, want always", s.Durability())
	}
	e, _ := newStore(t, Config{}, redistest.Args("--appendfsync", "everysec"))
	if e.Durability() != DurabilityEverysec {
		t.Fatalf("durability %q, want everysec", e.Durability())
	}
}

func TestConfig(t *testing.T) {
	srv := redistest.Start(t)
	for _, cfg := range []Config{{Addr: srv.Addr()}, {URL: srv.URL()}} {
		s, err := New(ctx, cfg)
		must(t, err)
		_, err = s.Now(ctx)
		must(t, err)
		s.Close()
	}
	for _, cfg := range []Config{{}, {Addr: srv.Addr(), URL: srv.URL()}, {URL: "http://x"}, {URL: srv.URL(), KeyPrefix: "a{b}"},
		{URL: srv.URL(), Shards: -1}} {
		if s, err := New(ctx, cfg); err == nil {
			s.Close()
			t.Errorf("%+v was accepted", cfg)
		}
	}
	// The shard count is part of every key: it cannot change under data.
	if _, err := New(ctx, Config{URL: srv.URL(), Shards: 8}); err == nil || !strings.Contains(err.Error(), "16 shards") {
		t.Fatalf("a keyspace laid out over 16 shards opened with 8: %v", err)
	}
	s, err := New(ctx, Config{URL: srv.URL(), Shards: 8, KeyPrefix: "other"})
	must(t, err)
	s.Close()
}

func TestDeadlineUsesRedisClock(t *testing.T) {
	s, _ := newStore(t, Config{})
	now, err := s.Now(ctx)
	must(t, err)
	// Far enough ahead that the first commit (an fsync under a loaded CI
	// machine) lands before it; the test then waits on the server's clock.
	deadline := now.Add(300 * time.Millisecond)
	c1 := storetest.Commit(newRun("r1", "alice", base), 0, "parked", []store.Ask{newAsk("r1", "a", "pending", "user:alice", deadline)}, "run.started")
	c1.Deadline = deadline // still in the future by the server's clock
	must(t, s.Commit(ctx, c1))

	// Wait on the server's clock, not on ours.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		n, err := s.Now(wait)
		must(t, err)
		if n.After(deadline) {
			break
		}
	}
	late := storetest.Commit(c1.Run, 1, "running", []store.Ask{newAsk("r1", "a", "approved", "user:alice", deadline)}, "ask.decided")
	late.Deadline = deadline
	if err := s.Commit(ctx, late); !errors.Is(err, store.ErrDeadline) {
		t.Fatalf("a decision after the deadline by Redis's clock: %v", err)
	}
	got, err := s.GetRun(ctx, "r1")
	must(t, err)
	sameRun(t, got, c1.Run)
	if a, _ := s.GetAsk(ctx, "r1/a"); a.State != "pending" {
		t.Fatalf("the refused decision changed the ask: %+v", a)
	}
	pending, _, err := s.ListAsks(ctx, store.AskQuery{States: []string{"pending"}})
	must(t, err)
	if len(pending) != 1 {
		t.Fatalf("the refused decision moved the ask out of the pending index: %+v", pending)
	}
}

func TestSurvivesKill9(t *testing.T) {
	s, srv := newStore(t, Config{})
	exp := base.Add(48 * time.Hour)
	c1 := storetest.Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started", "step.dispatched")
	c1.RequestKey = "alice:req-1"
	must(t, s.Commit(ctx, c1))
	c2 := storetest.Commit(c1.Run, 1, "parked", []store.Ask{newAsk("r1", "pay", "pending", "role:finance", exp)}, "step.succeeded", "ask.opened")
	must(t, s.Commit(ctx, c2)) // acknowledged: fsynced (appendfsync always)

	srv.Kill9()
	srv.Restart()

	s2, err := New(ctx, Config{URL: srv.URL()})
	must(t, err)
	defer s2.Close()
	for _, st := range []*Store{s2, s} { // a new client, and the old one reconnecting
		got, err := st.GetRun(ctx, "r1")
		must(t, err)
		sameRun(t, got, c2.Run)
		a, err := st.GetAsk(ctx, "r1/pay")
		must(t, err)
		sameAsk(t, a, c2.Asks[0])
		recs, err := st.Journal(ctx, "r1", 0, 0)
		must(t, err)
		sameRecords(t, recs, append(slices.Clone(c1.Journal), c2.Journal...))
		if seq, err := store.VerifyChain(recs); err != nil {
			t.Fatalf("chain broken at %d: %v", seq, err)
		}
		inbox, _, err := st.ListAsks(ctx, store.AskQuery{States: []string{"pending"}, Audiences: []string{"role:finance"}})
		must(t, err)
		if len(inbox) != 1 || inbox[0].ID != "r1/pay" {
			t.Fatalf("inbox after the crash: %+v", inbox)
		}
		dup := storetest.Commit(newRun("r2", "alice", base), 0, "running", nil, "run.started")
		dup.RequestKey = "alice:req-1"
		var de *store.DuplicateError
		if err := st.Commit(ctx, dup); !errors.As(err, &de) || de.RunID != "r1" {
			t.Fatalf("the request key was lost: %v", err)
		}
	}
}

// crc16 is the CRC-16/XMODEM Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the Redis Cluster slot of a key (its hash tag, if it has one).
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16([]byte(key)) % 16384)
}

func TestOneSlotPerCommit(t *testing.T) {
	s, srv := newStore(t, Config{}, redistest.Cluster())
	// Our slot function agrees with Redis's.
	for _, k := range []string{"foo", "somekey", "tg:{s07}:run:r1", "{user1000}.following", "a{}b", "x{y"} {
		got, err := srv.Do("CLUSTER", "KEYSLOT", k)
		must(t, err)
		if got != strconv.Itoa(slot(k)) {
			t.Fatalf("slot(%q) = %d, Redis says %s", k, slot(k), got)
		}
	}
	// The scripts reach keys only through KEYS, or index buckets, whose
	// keys the commit and range scripts make from the shard's tag (TAG,
	// bk(…); key, to: one made so). (PUBLISH names a channel, which no
	// slot holds.)
	for _, src := range append([]string{commitScriptSrc, claimScriptSrc, takeoverScriptSrc, releaseScriptSrc, rangeScriptSrc, journalScriptSrc}, workScriptSrcs...) {
		for _, call := range regexp.MustCompile(`redis\.call\('(\w+)'(, ([^,)]+))?`).FindAllStringSubmatch(src, -1) {
			bucket := strings.HasPrefix(call[3], "bk(") || call[3] == "key" || call[3] == "to" || call[3] == "dir" || call[3] == "SEQ" ||
				call[3] == "unpack(must" || call[3] == "unpack(names"
			if call[1] != "TIME" && call[1] != "PUBLISH" && !strings.HasPrefix(call[3], "KEYS[") && !bucket {
				t.Errorf("a script calls %s on %s, not on a declared key", call[1], call[3])
			}
		}
	}
	for _, v := range []string{"local TAG, SEQ, SPLIT = ARGV[7], KEYS[4],", "local key = bk(b)", "mustHave(bk(b))", "names[i] = bk(n)", "local key = TAG .. ':b:' .. list[i]", "local function moveAll(to,", "local function locate(dir,"} {
		if !strings.Contains(commitScriptSrc+rangeScriptSrc, v) {
			t.Errorf("the bucket keys are no longer made as %q: check what the scripts touch", v)
		}
	}

	// Watch what the script really touches.
	mon := monitor(t, srv.Addr())
	c1 := storetest.Commit(newRun("run-42", "alice", base), 0, "parked", []store.Ask{
		newAsk("run-42", "pay", "pending", "role:finance", base.Add(time.Hour)),
		newAsk("run-42", "ship", "pending", "user:bob", base.Add(2*time.Hour)),
	}, "run.started", "ask.opened")
	c1.Enqueue = []store.Work{{Queue: "tool:a.b", ID: "run-42/s/1", RunID: "run-42", Body: []byte("x")}}
	must(t, s.Commit(ctx, c1))
	c2 := storetest.Commit(c1.Run, 1, "running", []store.Ask{
		newAsk("run-42", "pay", "approved", "role:finance", base.Add(time.Hour)),
		newAsk("run-42", "ship", "pending", "user:carol", base.Add(3*time.Hour)),
		newAsk("run-42", "more", "pending", "user:dave", base.Add(3*time.Hour)),
	}, "ask.decided", "ask.opened")
	c2.Deadline = time.Now().Add(time.Hour)
	c2.Finish = []store.WorkRef{{Queue: "tool:a.b", ID: "run-42/s/1", RunID: "run-42"}}
	c2.Enqueue = []store.Work{{Queue: "tool:c.d", ID: "run-42/t/1", RunID: "run-42", Owner: "cp-a"}}
	must(t, s.Commit(ctx, c2))
	touched := mon.stop(t, s)

	p, err := s.prepare(c2)
	must(t, err)
	pr := prior{exists: true, version: 1, state: c1.Run.State, requester: c1.Run.Requester, created: c1.Run.CreatedAt, asks: c1.Asks}
	declared, _, _, err := s.scriptArgs(p, pr)
	must(t, err)
	if len(touched) < 10 {
		t.Fatalf("MONITOR saw only %v", touched)
	}
	want := slot(declared[0])
	for _, k := range append(declared, touched...) {
		if slot(k) != want {
			t.Errorf("key %s is in slot %d, the run in %d", k, slot(k), want)
		}
	}
	t.Logf("the commits touched %d keys, all in slot %d", len(uniq(touched)), want)
}

// monitorConn reads MONITOR output: the keys scripts touch.
type monitorConn struct {
	c    net.Conn
	r    *bufio.Reader
	mark string
}

func monitor(t *testing.T, sock string) *monitorConn {
	c, err := net.Dial("unix", sock)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	m := &monitorConn{c: c, r: bufio.NewReader(c), mark: fmt.Sprintf("monitor-end-%d", time.Now().UnixNano())}
	_, err = c.Write([]byte("MONITOR\r\n"))
	must(t, err)
	line, err := m.r.ReadString('\n')
	must(t, err)
	if !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q", line)
	}
	return m
}

var monitorLine = regexp.MustCompile(`\[\d+ lua\] "(\w+)"(?: "((?:[^"\\]|\\.)*)")?`)

// stop sends a marker through the store's client and returns the first
// argument of every command a script ran until the marker.
func (m *monitorConn) stop(t *testing.T, s *Store) []string {
	must(t, s.rdb.Echo(ctx, m.mark).Err())
	must(t, m.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	var keys []string
	for {
		line, err := m.r.ReadString('\n')
		must(t, err)
		if strings.Contains(line, m.mark) {
			return keys
		}
		if sm := monitorLine.FindStringSubmatch(line); sm != nil && !strings.EqualFold(sm[1], "time") && !strings.EqualFold(sm[1], "publish") {
			keys = append(keys, sm[2])
		}
	}
}

func TestKeyLayout(t *testing.T) {
	s, srv := newStore(t, Config{})
	c := storetest.Commit(newRun("r1", "alice", base), 0, "parked", []store.Ask{newAsk("r1", "pay", "pending", "user:bob", base)}, "run.started")
	c.RequestKey = "k1"
	must(t, s.Commit(ctx, c))
	must(t, s.PutPlan(ctx, "sha256:abc", []byte("{}")))
	out, err := srv.Do("KEYS", "*")
	must(t, err)
	keys := strings.Split(out, "\n")
	slices.Sort(keys)
	sr, sk := s.runTag("r1"), s.tag(s.shardOf("k1"))
	// One key for the run (its ask and journal inside), four index
	// directories with a bucket each, the shard's bucket counter and
	// counts; the journal list appears once the run's tail spills.
	want := []string{sr + ":run:r1", sr + ":asks:aud:user:bob:pending", sr + ":asks:state:pending",
		sr + ":runs:req:alice:parked", sr + ":runs:state:parked", sr + ":b:1", sr + ":b:2", sr + ":b:3", sr + ":b:4",
		sr + ":bseq", sr + ":counts", sk + ":reqkey:k1", "tg:config", "tg:plan:sha256:abc"}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("keys:\n got %q\nwant %q", keys, want)
	}
	if !regexp.MustCompile(`^tg:\{s\d\d\}$`).MatchString(sr) {
		t.Fatalf("shard tag %q", sr)
	}
}

func TestRequestKeyClaims(t *testing.T) {
	s, _ := newStore(t, Config{})
	create := func(id, key string) store.Commit {
		c := storetest.Commit(newRun(id, "alice", base), 0, "running", nil, "run.started")
		c.RequestKey = key
		return c
	}
	// A refused create gives its key back.
	late := create("r1", "k1")
	late.Deadline = base
	if err := s.Commit(ctx, late); !errors.Is(err, store.ErrDeadline) {
		t.Fatalf("late create: %v", err)
	}
	must(t, s.Commit(ctx, create("r2", "k1")))
	// Creating an existing run conflicts before the key is looked at, and
	// gives the new key back.
	if err := s.Commit(ctx, create("r2", "k2")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("creating r2 twice: %v", err)
	}
	must(t, s.Commit(ctx, create("r3", "k2")))
	// The same create retried: the run exists.
	if err := s.Commit(ctx, create("r3", "k2")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("retried create: %v", err)
	}
	// A claim with no run behind it: in flight while young, taken over when old.
	now, err := s.Now(ctx)
	must(t, err)
	must(t, s.rdb.HSet(ctx, s.reqKey("k3"), "run", "ghost", "at", now.Unix()).Err())
	var dup *store.DuplicateError
	if err := s.Commit(ctx, create("r4", "k3")); !errors.As(err, &dup) || dup.RunID != "ghost" {
		t.Fatalf("a young claim: %v", err)
	}
	must(t, s.rdb.HSet(ctx, s.reqKey("k3"), "at", now.Add(-2*orphanAfter).Unix()).Err())
	must(t, s.Commit(ctx, create("r4", "k3")))
	if err := s.Commit(ctx, create("r5", "k3")); !errors.As(err, &dup) || dup.RunID != "r4" {
		t.Fatalf("after the takeover: %v", err)
	}
	// Without a request key nothing is claimed.
	must(t, s.Commit(ctx, create("r6", "")))
}

func TestOddIDs(t *testing.T) {
	s, _ := newStore(t, Config{})
	exp := base.Add(time.Hour)
	asks := []store.Ask{
		{ID: "plain", RunID: "a/b", Title: "no slash", State: "pending", Audience: "user:x", DueAt: exp},
		{ID: "a/b/c", RunID: "a/b", Title: "two slashes", State: "pending", Audience: "user:x", DueAt: exp},
		{ID: "other/z", RunID: "a/b", Title: "another run's prefix", State: "pending", Audience: "user:x", DueAt: exp},
	}
	c := storetest.Commit(newRun("a/b", "user:al:ice", base), 0, "we:ird%3A", asks, "run.started")
	must(t, s.Commit(ctx, c))
	for _, a := range asks {
		got, err := s.GetAsk(ctx, a.ID)
		must(t, err)
		sameAsk(t, got, a)
	}
	list, _, err := s.ListAsks(ctx, store.AskQuery{RunID: "a/b"})
	must(t, err)
	if len(list) != 3 {
		t.Fatalf("run asks: %+v", list)
	}
	runs, _, err := s.ListRuns(ctx, store.RunQuery{Requester: "user:al:ice", States: []string{"we:ird%3A"}})
	must(t, err)
	if len(runs) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	// "user:al" in state "ice:we:ird%3A" must not find it.
	runs, _, err = s.ListRuns(ctx, store.RunQuery{Requester: "user:al", States: []string{"ice:we:ird%3A"}})
	must(t, err)
	if len(runs) != 0 {
		t.Fatalf("index keys collide: %+v", runs)
	}
	if _, err := s.GetAsk(ctx, "a/nothing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
}

func TestJournalKeepsRecordsExactly(t *testing.T) {
	s, _ := newStore(t, Config{})
	zone := time.FixedZone("X", -7*3600-30*60)
	payloads := []string{`{"a": 1,  "b" : [1, 2]}`, ` {"lead":1}`, `[1,2]`, `"str"`, `not json`, `{"h":"<&>\u00e9 ü"}`, ``, "\xff\xfe"}
	var recs []store.JournalRecord
	for i, p := range payloads {
		recs = append(recs, store.JournalRecord{Time: base.Add(time.Duration(i)*time.Nanosecond + 7).In(zone), Actor: "al\"ice", Kind: "k",
			Payload: json.RawMessage(p)})
	}
	r := newRun("r1", "alice", base)
	r.Version = 1
	r.JournalSeq, r.JournalHead = store.Chain("r1", 0, "", recs)
	must(t, s.Commit(ctx, store.Commit{Run: r, Journal: recs}))
	got, err := s.Journal(ctx, "r1", 0, 0)
	must(t, err)
	sameRecords(t, got, recs)
	if seq, err := store.VerifyChain(got); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
	page, err := s.Journal(ctx, "r1", 3, 2)
	must(t, err)
	if len(page) != 2 || page[0].Seq != 4 {
		t.Fatalf("page: %+v", page)
	}
	if page, _ := s.Journal(ctx, "r1", 100, 0); page != nil {
		t.Fatalf("past the end: %+v", page)
	}
}

// TestMatchesMemstore applies the same random commits to this store and to
// memstore, with many equal and sub-millisecond times, and checks that
// every read and every page agrees, tokens included.
func TestMatchesMemstore(t *testing.T) {
	seeds := 3
	if v, err := strconv.Atoi(os.Getenv("TOLLGATE_TEST_SEEDS")); err == nil {
		seeds = v
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { matchMemstore(t, seed) })
	}
}

func matchMemstore(t *testing.T, seed uint64) {
	// Odd seeds split and merge index buckets all the time.
	s, _ := newStore(t, Config{Shards: 5, IndexBucket: []int{0, 8}[seed%2]})
	m := memstore.New(memstore.Config{})
	rng := rand.New(rand.NewPCG(seed, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	when := func() time.Time {
		return base.Add(time.Duration(rng.IntN(4))*time.Millisecond + time.Duration(rng.IntN(3))*time.Nanosecond*333_333)
	}
	runs := map[string]store.Run{}
	var ids []string
	stops := []string{"a", "b", "c", "d"}
	audiences := []string{"user:alice", "role:finance", "user:bob"}
	askStates := []string{"pending", "approved", "expired"}
	runStates := []string{"running", "parked", "complete", "we:ird"}
	requesters := []string{"alice", "bob", "user:carol"}
	for i := range 600 {
		var c store.Commit
		if len(ids) < 120 && (len(ids) == 0 || rng.IntN(2) == 0) {
			id := fmt.Sprintf("r%d", rng.IntN(5000))
			if _, ok := runs[id]; ok {
				continue
			}
			c = storetest.Commit(newRun(id, pick(requesters...), when()), 0, pick(runStates...), nil, "run.started")
		} else {
			prev := runs[ids[rng.IntN(len(ids))]]
			c = storetest.Commit(prev, prev.Version, pick(runStates...), nil, "x")
			if rng.IntN(4) == 0 {
				c.Run.Requester = pick(requesters...)
			}
			if rng.IntN(10) == 0 {
				c.Run.CreatedAt = when()
			}
		}
		for range rng.IntN(3) {
			c.Asks = append(c.Asks, newAsk(c.Run.ID, pick(stops...), pick(askStates...), pick(audiences...), when()))
		}
		if rng.IntN(20) == 0 {
			c.ExpectVersion++ // stale
			c.Run.Version++
		}
		e1, e2 := m.Commit(ctx, c), s.Commit(ctx, c)
		if !sameErr(e1, e2) {
			t.Fatalf("commit %d: memstore %v, redis %v", i, e1, e2)
		}
		if e1 == nil {
			if _, ok := runs[c.Run.ID]; !ok {
				ids = append(ids, c.Run.ID)
			}
			runs[c.Run.ID] = c.Run
		}
	}
	checkIndexes(t, s)
	for _, id := range ids {
		a, err := m.GetRun(ctx, id)
		must(t, err)
		b, err := s.GetRun(ctx, id)
		must(t, err)
		sameRun(t, b, a)
		ja, _ := m.Journal(ctx, id, 0, 0)
		jb, err := s.Journal(ctx, id, 0, 0)
		must(t, err)
		sameRecords(t, jb, ja)
		for _, st := range stops {
			a, e1 := m.GetAsk(ctx, store.AskID(id, st))
			b, e2 := s.GetAsk(ctx, store.AskID(id, st))
			if (e1 == nil) != (e2 == nil) {
				t.Fatalf("GetAsk %s/%s: %v %v", id, st, e1, e2)
			}
			if e1 == nil {
				sameAsk(t, b, a)
			}
		}
	}
	subset := func(xs []string) []string {
		var out []string
		for _, x := range xs {
			if rng.IntN(3) == 0 {
				out = append(out, x)
			}
		}
		return out
	}
	limit := func() int {
		if rng.IntN(3) == 0 {
			return 10 + rng.IntN(40)
		}
		return 1 + rng.IntN(6)
	}
	for i := range 150 {
		rq := store.RunQuery{States: subset(runStates), Limit: limit()}
		if rng.IntN(2) == 0 {
			rq.Requester = pick(requesters...)
		}
		pages := 0
		for {
			a, na, e1 := m.ListRuns(ctx, rq)
			b, nb, e2 := s.ListRuns(ctx, rq)
			must(t, e1)
			must(t, e2)
			if len(a) != len(b) || na != nb {
				t.Fatalf("query %d %+v page %d: memstore %d runs next %q, redis %d next %q", i, rq, pages, len(a), na, len(b), nb)
			}
			for j := range a {
				sameRun(t, b[j], a[j])
			}
			if na == "" {
				break
			}
			rq.PageToken = na
			pages++
		}
		aq := store.AskQuery{States: subset(askStates), Audiences: subset(audiences), Limit: limit()}
		switch rng.IntN(4) {
		case 0:
			aq.RunID = ids[rng.IntN(len(ids))]
		case 1:
			aq.DueBefore = when()
		}
		pages = 0
		for {
			a, na, e1 := m.ListAsks(ctx, aq)
			b, nb, e2 := s.ListAsks(ctx, aq)
			must(t, e1)
			must(t, e2)
			if len(a) != len(b) || na != nb {
				t.Fatalf("query %d %+v page %d: memstore %d asks next %q, redis %d next %q", i, aq, pages, len(a), na, len(b), nb)
			}
			for j := range a {
				sameAsk(t, b[j], a[j])
			}
			if na == "" {
				break
			}
			aq.PageToken = na
			pages++
		}
	}
}

func sameErr(a, b error) bool {
	for _, e := range []error{store.ErrConflict, store.ErrDeadline, store.ErrDuplicate, store.ErrInvalid, store.ErrNotFound} {
		if errors.Is(a, e) != errors.Is(b, e) {
			return false
		}
	}
	return (a == nil) == (b == nil)
}

// TestPagesPastTies lists many asks and runs sharing one instant, a page
// smaller than the tie.
func TestPagesPastTies(t *testing.T) {
	s, _ := newStore(t, Config{})
	exp := base.Add(time.Hour)
	var want []string
	for i := range 40 {
		id := fmt.Sprintf("r%02d", i)
		var asks []store.Ask
		for j := range 3 {
			asks = append(asks, newAsk(id, fmt.Sprint(j), "pending", "user:alice", exp))
			want = append(want, store.AskID(id, fmt.Sprint(j)))
		}
		must(t, s.Commit(ctx, storetest.Commit(newRun(id, "alice", base), 0, "parked", asks, "run.started")))
	}
	slices.Sort(want)
	for _, limit := range []int{1, 2, 7, 50} {
		var got []string
		tok := ""
		for {
			page, next, err := s.ListAsks(ctx, store.AskQuery{States: []string{"pending"}, Audiences: []string{"user:alice"}, Limit: limit, PageToken: tok})
			must(t, err)
			for _, a := range page {
				got = append(got, a.ID)
			}
			if next == "" {
				break
			}
			tok = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: got %d asks %v", limit, len(got), got)
		}
		var runs []string
		tok = ""
		for {
			page, next, err := s.ListRuns(ctx, store.RunQuery{Limit: limit, PageToken: tok})
			must(t, err)
			for _, r := range page {
				runs = append(runs, r.ID)
			}
			if next == "" {
				break
			}
			tok = next
		}
		if len(runs) != 40 || !slices.IsSortedFunc(runs, func(a, b string) int { return strings.Compare(b, a) }) {
			t.Fatalf("limit %d: runs %v", limit, runs)
		}
	}
}

// allKeys lists the keys matching pattern on every master.
func allKeys(t *testing.T, s *Store, pattern string) []string {
	t.Helper()
	if s.cluster == nil {
		keys, err := s.rdb.Keys(ctx, pattern).Result()
		must(t, err)
		return keys
	}
	var mu sync.Mutex
	var keys []string
	must(t, s.cluster.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		ks, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	}))
	return keys
}

// checkIndexes verifies the index buckets and what they say: every
// directory's buckets exist, are not empty, hold only scores from their
// bound to the next bucket's, and belong to one directory; no bucket is
// orphaned; every entry points at a run or ask in the state, audience or
// requester and time its index says; every run and ask is in each index
// it belongs to; and the counts are the runs and asks in each state.
func checkIndexes(t *testing.T, s *Store) {
	t.Helper()
	keys := allKeys(t, s, s.prefix+":{*")
	entries := map[string]bool{} // directory + " " + member
	owner := map[string]string{} // bucket key → its directory
	for _, k := range keys {
		typ, err := s.rdb.Type(ctx, k).Result()
		must(t, err)
		if typ != "zset" || strings.Contains(k, ":b:") || strings.Contains(k, ":wr:") {
			continue
		}
		tag := k[:strings.IndexByte(k, '}')+1]
		dir, err := s.rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		must(t, err)
		if len(dir) == 0 {
			t.Errorf("directory %s is empty but there", k)
		}
		for i, b := range dir {
			bk := bucketKey(tag, b.Member.(string))
			if o, ok := owner[bk]; ok {
				t.Errorf("bucket %s is in %s and %s", bk, o, k)
			}
			owner[bk] = k
			zs, err := s.rdb.ZRangeWithScores(ctx, bk, 0, -1).Result()
			must(t, err)
			if len(zs) == 0 {
				t.Errorf("bucket %s of %s is empty or missing", bk, k)
			}
			for _, z := range zs {
				if z.Score < b.Score || (i+1 < len(dir) && z.Score >= dir[i+1].Score) {
					t.Errorf("bucket %s (from %v) of %s holds score %v", bk, b.Score, k, z.Score)
				}
				e := entry{ms: int64(z.Score), member: z.Member.(string), tag: tag}
				if entries[k+" "+e.member] {
					t.Errorf("%s holds %s twice", k, e.member)
				}
				entries[k+" "+e.member] = true
				if strings.Contains(k, ":asks:") {
					a, err := s.GetAsk(ctx, e.id())
					must(t, err)
					if !a.DueAt.Equal(e.time()) || (k != askStateKey(tag, a.State) && k != askAudKey(tag, a.Audience, a.State)) {
						t.Errorf("stale index entry %s %s (%v): the ask is %+v", k, e.member, e.time(), a)
					}
				} else {
					r, err := s.GetRun(ctx, e.id())
					must(t, err)
					if !r.CreatedAt.Equal(e.time()) || (k != runStateKey(tag, r.State) && k != runReqKey(tag, r.Requester, r.State)) {
						t.Errorf("stale index entry %s %s (%v): the run is %+v", k, e.member, e.time(), r)
					}
				}
			}
		}
	}
	for _, k := range keys {
		if strings.Contains(k, ":b:") && owner[k] == "" {
			t.Errorf("bucket %s belongs to no directory", k)
		}
	}
	counts := store.Counts{Runs: map[string]int64{}, Asks: map[string]int64{}}
	for _, k := range keys {
		tag, id, ok := strings.Cut(k, ":run:")
		if !ok {
			continue
		}
		r, err := s.GetRun(ctx, id)
		must(t, err)
		counts.Runs[r.State]++
		_, m := scoreMember(r.CreatedAt, id)
		for _, ik := range []string{runStateKey(tag, r.State), runReqKey(tag, r.Requester, r.State)} {
			if !entries[ik+" "+m] {
				t.Errorf("run %s is missing from %s", id, ik)
			}
		}
		asks, _, err := s.ListAsks(ctx, store.AskQuery{RunID: id, Limit: 500})
		must(t, err)
		for _, a := range asks {
			counts.Asks[a.State]++
			_, m := scoreMember(a.DueAt, a.ID)
			for _, ik := range []string{askStateKey(tag, a.State), askAudKey(tag, a.Audience, a.State)} {
				if !entries[ik+" "+m] {
					t.Errorf("ask %s is missing from %s", a.ID, ik)
				}
			}
		}
	}
	got, err := s.Counts(ctx)
	must(t, err)
	for _, x := range []struct{ got, want map[string]int64 }{{got.Runs, counts.Runs}, {got.Asks, counts.Asks}} {
		for st, n := range x.got {
			if n != x.want[st] {
				t.Errorf("counts say %d in state %q, the store holds %d", n, st, x.want[st])
			}
		}
		for st, n := range x.want {
			if x.got[st] != n {
				t.Errorf("counts say %d in state %q, the store holds %d", x.got[st], st, n)
			}
		}
	}
}
