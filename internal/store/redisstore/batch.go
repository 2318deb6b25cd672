package redisstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// batcher sends the commands of concurrent callers to Redis together, in
// shared pipelines: one write and one read for many commits instead of one
// each, on both sides of the socket. A command never waits for a timer:
// it goes at once unless batchWorkers pipelines are already in flight, and
// then with everything that queued meanwhile. Commands of one call stay
// together and in order (on a cluster, in order per node: the store's
// calls of several commands are all on one shard); calls are independent
// of each other (a pipeline is not a transaction, and every commit is its
// own script).
type batcher struct {
	rdb  pipeliner
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	queue  []*batchCall
	closed bool
}

// batchWorkers is how many pipelines may be in flight at once.
const batchWorkers = 4

// maxBatch bounds the calls in one pipeline.
const maxBatch = 256

type batchCall struct {
	cmds []redis.Cmder
	done chan struct{}
}

var errClosed = fmt.Errorf("redisstore: the store is closed: %w", store.ErrUnavailable)

// pipeliner makes pipelines: a *redis.Client, or a *redis.ClusterClient,
// whose pipelines send each command to its slot's master (one pipeline per
// node, at once), follow MOVED and ASK per command, and still leave each
// command its own result.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

func newBatcher(rdb pipeliner) *batcher {
	b := &batcher{rdb: rdb, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	b.wg.Add(batchWorkers)
	for range batchWorkers {
		go b.work()
	}
	return b
}

// close stops the workers after they have sent what was queued. Closing
// again does nothing.
func (b *batcher) close() {
	b.mu.Lock()
	was := b.closed
	b.closed = true
	b.mu.Unlock()
	if !was {
		close(b.stop)
	}
	b.wg.Wait()
}

// do sends cmds (in one pipeline, in order) and waits for their replies;
// each command carries its own result and error. If ctx ends first, do
// returns its error and the commands may still be sent.
func (b *batcher) do(ctx context.Context, cmds ...redis.Cmder) error {
	c := &batchCall{cmds: cmds, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errClosed
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default: // a wake-up is pending: a worker will take this call too
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *batcher) work() {
	defer b.wg.Done()
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			b.drain()
			return
		}
		b.drain()
	}
}

// drain sends pipelines until the queue is empty, waking another worker
// whenever it leaves calls behind.
func (b *batcher) drain() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		if len(b.queue) == 0 {
			b.queue = nil
		}
		left := len(b.queue) > 0
		b.mu.Unlock()
		if n == 0 {
			return
		}
		if left {
			select {
			case b.wake <- struct{}{}:
			default:
			}
		}
		b.send(batch)
	}
}

func (b *batcher) send(batch []*batchCall) {
	ctx := context.Background() // the client's read and write timeouts bound it
	pipe := b.rdb.Pipeline()
	for _, c := range batch {
		for _, cmd := range c.cmds {
			if n := cmd.Name(); n == "evalsha" || n == "eval" {
				cmd = sendOnce{cmd}
			}
			_ = pipe.Process(ctx, cmd) // queues it
		}
	}
	_, _ = pipe.Exec(ctx) // each command holds its own error
	for _, c := range batch {
		close(c.done)
	}
}

// sendOnce marks a script in a shared pipeline as not to be sent again.
// go-redis resends a whole pipeline (to one node, for a cluster) when its
// first command fails with an error it deems retryable (LOADING,
// TRYAGAIN, CLUSTERDOWN…) or the connection breaks mid-read, so a commit
// script that ran would run again and answer a version conflict for its
// own write (and a create would give its request key back). A pipeline
// that holds a script is therefore never resent: each command keeps the
// answer it got, an error of unknown outcome included. The cluster client
// still follows MOVED and ASK, command by command: a redirected command
// did not run.
type sendOnce struct{ redis.Cmder }

func (sendOnce) NoRetry() bool { return true }
