package redisstore

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
)

// runReads counts, from the client's side, how the store's reads of run
// keys reach Redis (whatever the command, so the count holds however a
// run is encoded): how many went alone and how many pipelines carried
// some, with how many each.
type runReads struct {
	mu      sync.Mutex
	single  int
	perPipe []int
}

func (h *runReads) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *runReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if readsRun(cmd) {
			h.mu.Lock()
			h.single++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *runReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if readsRun(c) {
				n++
			}
		}
		if n > 0 {
			h.mu.Lock()
			h.perPipe = append(h.perPipe, n)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// readsRun reports whether cmd names a run's own key first.
func readsRun(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	key, _ := args[1].(string)
	return strings.Contains(key, ":run:")
}

func (h *runReads) reset() {
	h.mu.Lock()
	h.single, h.perPipe = 0, nil
	h.mu.Unlock()
}

func (h *runReads) counts() (int, []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.single, slices.Clone(h.perPipe)
}

// GetRuns reads runs of every shard in one pipeline — on one server, and
// on a cluster of three masters (where the client splits that pipeline
// per node and sends the parts at once) — never one round trip per run.
func TestGetRunsIsOnePipeline(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *Store
	}{
		{"one server", func(t *testing.T) *Store { s, _ := newStore(t, Config{}); return s }},
		{"three masters", func(t *testing.T) *Store {
			s := newClusterStore(t, redistest.StartCluster(t, 3), Config{})
			t.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.open(t)
			const n = 50
			ids := make([]string, 0, n+1)
			for i := range n {
				id := fmt.Sprintf("page-%d", i)
				must(t, s.Commit(ctx, storetest.Commit(newRun(id, "alice", base), 0, "running", nil, "run.started")))
				ids = append(ids, id)
			}
			ids = append(ids, "page-missing")
			shards := map[int]bool{}
			for _, id := range ids {
				shards[s.shardOf(id)] = true
			}
			if len(shards) < 2 {
				t.Fatalf("the page's runs are in %d shard: the test proves nothing", len(shards))
			}
			h := &runReads{}
			s.rdb.AddHook(h)
			runs, err := s.GetRuns(ctx, ids)
			must(t, err)
			single, pipes := h.counts()
			if single != 0 || len(pipes) != 1 || pipes[0] != len(ids) {
				t.Fatalf("GetRuns of %d runs in %d shards: %d reads alone, pipelines of %v reads; want one pipeline of all",
					len(ids), len(shards), single, pipes)
			}
			for i, id := range ids[:n] {
				if runs[i].ID != id || runs[i].Version != 1 {
					t.Fatalf("runs[%d] = %s v%d, want %s v1", i, runs[i].ID, runs[i].Version, id)
				}
			}
			if runs[n].ID != "" {
				t.Fatalf("the missing run read as %+v", runs[n])
			}
			// The control: GetRun one by one is a round trip each.
			h.reset()
			for _, id := range ids[:3] {
				_, _ = s.GetRun(ctx, id)
			}
			if single, pipes := h.counts(); single+len(pipes) != 3 {
				t.Fatalf("three GetRun calls counted as %d alone and %d pipelines: the hook does not see reads", single, len(pipes))
			}
		})
	}
}
