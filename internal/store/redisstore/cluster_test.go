package redisstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
)

// clusterURL names c as the store's Config.URL does: the first node, and
// the others as more seeds.
func clusterURL(c *redistest.ClusterNodes) string {
	addrs := c.Addrs()
	u := "redis+cluster://" + addrs[0]
	for i, a := range addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

// flushCluster empties every node.
func flushCluster(t testing.TB, c *redistest.ClusterNodes) {
	t.Helper()
	for i := range c.Len() {
		if _, err := c.Node(i).Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
	}
}

func newClusterStore(t testing.TB, c *redistest.ClusterNodes, cfg Config) *Store {
	t.Helper()
	cfg.URL = clusterURL(c)
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformanceOnThreeMasters runs the suite against a Redis Cluster of
// three masters that split the slots: every shard's keys live on one of
// them, and the client must route each command, pipeline and script.
func TestConformanceOnThreeMasters(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	start := time.Now()
	storetest.Run(t, func(t *testing.T) store.Store {
		flushCluster(t, c)
		s := newClusterStore(t, c, Config{})
		if s.Durability() != DurabilityAlways {
			t.Fatalf("durability %q, want always", s.Durability())
		}
		return s
	})
	t.Logf("the suite took %v on three masters", time.Since(start))
}

// nodeKeys lists the keys node i holds.
func nodeKeys(t testing.TB, c *redistest.ClusterNodes, i int) []string {
	t.Helper()
	out, err := c.Node(i).Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// tagOf is the hash tag of a key, with its braces ("" if it has none).
func tagOf(key string) string {
	i := strings.IndexByte(key, '{')
	j := strings.IndexByte(key, '}')
	if i < 0 || j < i {
		return ""
	}
	return key[i : j+1]
}

// Runs spread over every master, and each run keeps all its keys (run,
// journal, asks, index entries) in its shard's one slot, on one node.
func TestRunsSpreadOverMasters(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	s := newClusterStore(t, c, Config{})
	defer s.Close()
	const n = 48
	exp := base.Add(time.Hour)
	for i := range n {
		id := fmt.Sprintf("run-%d", i)
		c1 := storetest.Commit(newRun(id, "alice", base.Add(time.Duration(i)*time.Millisecond)), 0, "parked",
			[]store.Ask{newAsk(id, "pay", "pending", "role:finance", exp)}, "run.started", "ask.opened")
		c1.RequestKey = "req-" + id
		must(t, s.Commit(ctx, c1))
	}
	must(t, s.PutPlan(ctx, "sha256:abc", []byte("{}")))

	tagNode := map[string]int{} // shard tag → the node holding its keys
	perNode := make([]int, c.Len())
	for i := range c.Len() {
		for _, k := range nodeKeys(t, c, i) {
			tag := tagOf(k)
			if tag == "" {
				continue // tg:config, tg:plan:…: a slot of their own
			}
			if j, ok := tagNode[tag]; ok && j != i {
				t.Fatalf("shard %s has keys on node %d and node %d", tag, j, i)
			}
			tagNode[tag] = i
			if strings.Contains(k, ":run:") {
				perNode[i]++
			}
		}
	}
	for i, runs := range perNode {
		if runs == 0 {
			t.Fatalf("node %d holds no run (runs per node: %v)", i, perNode)
		}
	}
	t.Logf("runs per master: %v; %d shards", perNode, len(tagNode))

	// Each run's keys: where its tag lives, all in the tag's slot.
	for i := range n {
		id := fmt.Sprintf("run-%d", i)
		tag := s.runTag(id)
		node, ok := tagNode[tagOf(tag)]
		if !ok {
			t.Fatalf("run %s: no keys of its shard %s", id, tag)
		}
		keys := []string{runKey(tag, id), countsKey(tag), bucketSeqKey(tag)}
		for _, dir := range []string{runStateKey(tag, "parked"), runReqKey(tag, "alice", "parked"), askStateKey(tag, "pending"),
			askAudKey(tag, "role:finance", "pending")} {
			keys = append(keys, dir)
			buckets, err := c.Node(node).Do("ZRANGE", dir, "0", "-1")
			must(t, err)
			for _, b := range strings.Fields(buckets) {
				keys = append(keys, bucketKey(tag, b))
			}
		}
		want := ""
		for _, k := range keys {
			got, err := c.Node(node).Do("EXISTS", k)
			if err != nil || got != "1" {
				t.Fatalf("run %s: key %s on node %d: %q %v", id, k, node, got, err)
			}
			sl, err := c.Node(node).Do("CLUSTER", "KEYSLOT", k)
			must(t, err)
			if want == "" {
				want = sl
			}
			if sl != want {
				t.Fatalf("run %s: key %s is in slot %s, its run in %s", id, k, sl, want)
			}
		}
	}

	// Reads that span the shards see every run.
	var all []store.Run
	tok := ""
	for {
		page, next, err := s.ListRuns(ctx, store.RunQuery{Limit: 7, PageToken: tok})
		must(t, err)
		all = append(all, page...)
		if next == "" {
			break
		}
		tok = next
	}
	if len(all) != n {
		t.Fatalf("ListRuns: %d runs, want %d", len(all), n)
	}
	inbox, _, err := s.ListAsks(ctx, store.AskQuery{States: []string{"pending"}, Audiences: []string{"role:finance"}, Limit: 100})
	must(t, err)
	if len(inbox) != n {
		t.Fatalf("ListAsks: %d asks, want %d", len(inbox), n)
	}
	counts, err := s.Counts(ctx)
	must(t, err)
	if counts.Runs["parked"] != n || counts.Asks["pending"] != n {
		t.Fatalf("counts %+v", counts)
	}
	checkIndexes(t, s)
}

// Concurrent commits share the batcher's pipelines, which the cluster
// client splits by node; each still gets its own answer.
func TestConcurrentCommitsOnThreeMasters(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	s := newClusterStore(t, c, Config{})
	defer s.Close()
	concurrentCommits(t, s)
}

// migration moves slot slot from node from to node to, as redis-cli
// --cluster reshard does: IMPORTING and MIGRATING, then MIGRATE of keys,
// then SETSLOT NODE on every master.
type migration struct {
	t        *testing.T
	c        *redistest.ClusterNodes
	slot     string
	from, to int
	ids      []string
}

func startMigration(t *testing.T, c *redistest.ClusterNodes, slot string, from, to int) *migration {
	m := &migration{t: t, c: c, slot: slot, from: from, to: to}
	for i := range c.Len() {
		id, err := c.Node(i).Do("CLUSTER", "MYID")
		must(t, err)
		m.ids = append(m.ids, id)
	}
	m.do(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", m.ids[from])
	m.do(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", m.ids[to])
	return m
}

func (m *migration) do(node int, args ...string) string {
	m.t.Helper()
	out, err := m.c.Node(node).Do(args...)
	if err != nil {
		m.t.Fatalf("node %d: %v: %v", node, args, err)
	}
	return out
}

// move migrates keys (all of the slot's if none are named).
func (m *migration) move(keys ...string) {
	m.t.Helper()
	if len(keys) == 0 {
		out := m.do(m.from, "CLUSTER", "GETKEYSINSLOT", m.slot, "100000")
		if out == "" {
			return
		}
		keys = strings.Split(out, "\n")
	}
	_, port, _ := strings.Cut(m.c.Addrs()[m.to], ":")
	m.do(m.from, append([]string{"MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS"}, keys...)...)
}

// finish gives the slot to its new owner on every node and waits until
// they all agree.
func (m *migration) finish() {
	m.t.Helper()
	m.move()
	for _, i := range []int{m.to, m.from} {
		m.do(i, "CLUSTER", "SETSLOT", m.slot, "NODE", m.ids[m.to])
	}
	for i := range m.c.Len() {
		if i != m.to && i != m.from {
			m.do(i, "CLUSTER", "SETSLOT", m.slot, "NODE", m.ids[m.to])
		}
	}
	if err := m.c.Wait(); err != nil {
		m.t.Fatal(err)
	}
}

// errorCount is how many replies of kind (MOVED, ASK, TRYAGAIN) node i has
// sent (INFO errorstats).
func errorCount(t *testing.T, c *redistest.ClusterNodes, i int, kind string) int {
	t.Helper()
	info, err := c.Node(i).Info("errorstats")
	must(t, err)
	v, _ := strings.CutPrefix(info["errorstat_"+kind], "count=")
	n, _ := strconv.Atoi(v)
	return n
}

// ownerOf is the node that serves key.
func ownerOf(t *testing.T, c *redistest.ClusterNodes, key string) int {
	t.Helper()
	for i := range c.Len() {
		if _, err := c.Node(i).Do("EXISTS", key); err == nil {
			return i
		}
	}
	t.Fatalf("no node serves %s", key)
	return -1
}

// A run's slot moves to another master under a store whose slot map says
// otherwise. While it moves, reads follow ASK and a commit is refused as
// unavailable, writing nothing (Redis checks a script's keys before it
// runs it); once it has moved, every call follows MOVED, and a commit
// finds its script missing on the new owner and sends it again.
func TestSlotMovesUnderTheStore(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	s := newClusterStore(t, c, Config{})
	defer s.Close()
	exp := base.Add(time.Hour)
	c1 := storetest.Commit(newRun("r1", "alice", base), 0, "parked", []store.Ask{newAsk("r1", "pay", "pending", "role:finance", exp)},
		"run.started", "ask.opened")
	c1.RequestKey = "req-1"
	must(t, s.Commit(ctx, c1))
	tag := s.runTag("r1")
	key := runKey(tag, "r1")
	from := ownerOf(t, c, key)
	to := (from + 1) % c.Len()
	sl, err := c.Node(from).Do("CLUSTER", "KEYSLOT", key)
	must(t, err)

	// Half-way: the run's hash is on the new owner, the rest not yet.
	m := startMigration(t, c, sl, from, to)
	m.move(key)
	asks := errorCount(t, c, from, "ASK")
	got, err := s.GetRun(ctx, "r1")
	must(t, err)
	sameRun(t, got, c1.Run)
	if errorCount(t, c, from, "ASK") == asks {
		t.Fatal("the read was not redirected by ASK")
	}
	c2 := storetest.Commit(c1.Run, 1, "running", []store.Ask{newAsk("r1", "pay", "approved", "role:finance", exp)}, "ask.decided")
	if err := s.Commit(ctx, c2); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a commit while its slot is half-migrated: %v", err)
	}
	got, err = s.GetRun(ctx, "r1")
	must(t, err)
	sameRun(t, got, c1.Run)

	// Moved: the store's map is stale, Redis answers MOVED.
	m.finish()
	if _, err := c.Node(to).Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	moved := errorCount(t, c, from, "MOVED")
	must(t, s.Commit(ctx, c2))
	if errorCount(t, c, from, "MOVED") == moved {
		t.Fatal("the commit was not redirected by MOVED")
	}
	got, err = s.GetRun(ctx, "r1")
	must(t, err)
	sameRun(t, got, c2.Run)
	if out, err := c.Node(to).Do("GETRANGE", key, "1", "8"); err != nil || out != be64(2) {
		t.Fatalf("the new owner has version %q %v", out, err)
	}
	a, err := s.GetAsk(ctx, "r1/pay")
	must(t, err)
	sameAsk(t, a, c2.Asks[0])
	recs, err := s.Journal(ctx, "r1", 0, 0)
	must(t, err)
	sameRecords(t, recs, append(slices.Clone(c1.Journal), c2.Journal...))
	dup := storetest.Commit(newRun("r2", "alice", base), 0, "running", nil, "run.started")
	dup.RequestKey = "req-1"
	var de *store.DuplicateError
	if err := s.Commit(ctx, dup); !errors.As(err, &de) || de.RunID != "r1" {
		t.Fatalf("the request key after the move: %v", err)
	}
	checkIndexes(t, s)
}

// The store is as durable as its least durable node; a node without an
// append-only file is refused, and named.
func TestClusterDurability(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	if _, err := c.Node(1).Do("CONFIG", "SET", "appendfsync", "everysec"); err != nil {
		t.Fatal(err)
	}
	e := newClusterStore(t, c, Config{})
	defer e.Close()
	if e.Durability() != DurabilityEverysec {
		t.Fatalf("durability %q, want everysec (the least durable node's)", e.Durability())
	}
	// (Not back on: a node turning its append-only file on refuses
	// SIGTERM until the file is written.)
	if _, err := c.Node(2).Do("CONFIG", "SET", "appendonly", "no"); err != nil {
		t.Fatal(err)
	}
	_, err := New(ctx, Config{URL: clusterURL(c)})
	if err == nil || !strings.Contains(err.Error(), c.Addrs()[2]) || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("a cluster with a volatile node: %v", err)
	}
	s, err := New(ctx, Config{URL: clusterURL(c), AllowVolatile: true})
	must(t, err)
	defer s.Close()
	if s.Durability() != DurabilityVolatile {
		t.Fatalf("durability %q, want volatile", s.Durability())
	}
}

// One seed is enough; a bad cluster URL is refused; New on a cluster
// nobody answers for fails, naming the seeds.
func TestClusterConfig(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	s, err := New(ctx, Config{URL: "redis+cluster://" + c.Addrs()[1]})
	must(t, err)
	must(t, s.Commit(ctx, storetest.Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")))
	s.Close()
	for _, u := range []string{"redis+cluster://" + c.Addrs()[0] + "?nosuch=1", "redis+cluster://" + c.Addrs()[0] + "/3"} {
		if s, err := New(ctx, Config{URL: u}); err == nil {
			s.Close()
			t.Errorf("%s was accepted", u)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := New(cctx, Config{URL: "redis+cluster://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("a cluster nobody answers for: %v", err)
	}
}

// A shared pipeline is never sent twice: when the first command a node
// gets in it fails with an error go-redis would retry (TRYAGAIN, from a
// slot being migrated), the commit that ran after it in the same pipeline
// keeps its own answer instead of being run again (and answering a
// version conflict for the write it made).
func TestPipelineIsNotResentAfterTryAgain(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	s := newClusterStore(t, c, Config{})
	defer s.Close()
	c1 := storetest.Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")
	must(t, s.Commit(ctx, c1))
	key := runKey(s.runTag("r1"), "r1")
	node := ownerOf(t, c, key)
	runSlot, err := c.Node(node).Do("CLUSTER", "KEYSLOT", key)
	must(t, err)
	// Another slot of the same node, half-migrated: a command on two of
	// its keys, one moved away, answers TRYAGAIN.
	var a, b, sl string
	for i := 0; sl == ""; i++ {
		a, b = fmt.Sprintf("{t%d}a", i), fmt.Sprintf("{t%d}b", i)
		if _, err := c.Node(node).Do("SET", a, "1"); err != nil {
			continue // another node's slot
		}
		if got, _ := c.Node(node).Do("CLUSTER", "KEYSLOT", a); got != runSlot {
			sl = got
		}
	}
	_, err = c.Node(node).Do("SET", b, "1")
	must(t, err)
	m := startMigration(t, c, sl, node, (node+1)%c.Len())
	m.move(a)
	tries := errorCount(t, c, node, "TRYAGAIN")

	c2 := storetest.Commit(c1.Run, 1, "complete", nil, "run.completed")
	p, err := s.prepare(c2)
	must(t, err)
	pr, err := s.readPrior(ctx, "r1", p.tag)
	must(t, err)
	keys, args, _, err := s.scriptArgs(p, pr)
	must(t, err)
	mget := redis.NewSliceCmd(ctx, "mget", a, b)
	commit := redis.NewCmd(ctx, evalArgs("evalsha", commitScript.Hash(), keys, args)...)
	s.batch.send([]*batchCall{{cmds: []redis.Cmder{mget}, done: make(chan struct{})}, {cmds: []redis.Cmder{commit}, done: make(chan struct{})}})
	if err := mget.Err(); err == nil || !redis.IsTryAgainError(err) {
		t.Fatalf("MGET across a half-migrated slot: %v", err)
	}
	if code, err := commit.Int(); err != nil || code != 0 {
		t.Fatalf("the commit sent after it answered %d %v (run again?)", code, err)
	}
	if n := errorCount(t, c, node, "TRYAGAIN"); n != tries+1 {
		t.Fatalf("the node answered TRYAGAIN %d times: the pipeline was sent again", n-tries)
	}
	got, err := s.GetRun(ctx, "r1")
	must(t, err)
	sameRun(t, got, c2.Run)
}

// Skills and schedules on a cluster: each kind keeps its keys in one
// slot (its scripts reach keys only through KEYS), and a node that lost
// the scripts (New does not load them) is sent their source.
func TestRegistryOnCluster(t *testing.T) {
	for _, sc := range registryScripts {
		for _, call := range regexp.MustCompile(`redis\.call\('(\w+)'(, ([^,)]+))?`).FindAllStringSubmatch(sc.src, -1) {
			if !strings.HasPrefix(call[3], "KEYS[") {
				t.Errorf("a script calls %s on %s, not on a declared key", call[1], call[3])
			}
		}
	}
	c := redistest.StartCluster(t, 3)
	s := newClusterStore(t, c, Config{})
	defer s.Close()
	for i := range c.Len() {
		if _, err := c.Node(i).Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.AddSkillVersion(ctx, store.SkillVersion{Name: "pay:run", Source: "x", Author: "alice", At: base}, 0)
	must(t, err)
	if v.Version != 1 {
		t.Fatalf("the first version is %d", v.Version)
	}
	if _, err := s.AddSkillVersion(ctx, store.SkillVersion{Name: "pay:run", Author: "bob", At: base, Deleted: true}, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a stale version on the cluster: %v", err)
	}
	sc, err := s.PutSchedule(ctx, store.Schedule{Name: "nightly", Skill: "pay:run", Cron: "0 1 * * *", CreatedAt: base}, 0)
	must(t, err)
	if sc.Version != 1 {
		t.Fatalf("the first schedule version is %d", sc.Version)
	}
	if list, _, err := s.ListSkills(ctx, "", 0); err != nil || len(list) != 1 || list[0].Name != "pay:run" {
		t.Fatalf("ListSkills on the cluster: %+v %v", list, err)
	}
	for _, keys := range [][]string{
		{s.skillKey("pay:run"), s.skillNamesKey(), s.skillRowsKey()},
		{s.schedulesKey(), s.scheduleVersionsKey()},
	} {
		node := ownerOf(t, c, keys[0])
		want, err := c.Node(node).Do("CLUSTER", "KEYSLOT", keys[0])
		must(t, err)
		for _, k := range keys {
			if got, err := c.Node(node).Do("EXISTS", k); err != nil || got != "1" {
				t.Fatalf("key %s on node %d: %q %v", k, node, got, err)
			}
			if sl, err := c.Node(node).Do("CLUSTER", "KEYSLOT", k); err != nil || sl != want {
				t.Fatalf("key %s is in slot %s, %s in %s (%v)", k, sl, keys[0], want, err)
			}
		}
	}
	must(t, s.DeleteSchedule(ctx, "nightly", 1))
}
