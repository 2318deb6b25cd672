package redisserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ClusterConfig says how to start a Redis Cluster of several masters.
type ClusterConfig struct {
	// Dir holds one data directory per node (node0, node1, …, made by
	// StartCluster); it must exist.
	Dir string
	// Masters is the number of masters (at least 3, as redis-cli --cluster
	// create requires); the slots are split evenly between them and there
	// are no replicas.
	Masters int
	// Volatile and Args are as in Config, for every node.
	Volatile bool
	Args     []string
}

// Cluster is a running Redis Cluster: redis-server processes in cluster
// mode on loopback TCP ports (and each on its own unix socket, for Do),
// joined by redis-cli --cluster create.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts cfg.Masters nodes, joins them into one cluster that
// splits the slots between them, and waits until every node reports
// cluster_state:ok and every node sees the same masters owning the same
// slots. Close it when done. It needs redis-server and redis-cli on PATH.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("redisserver: a data directory is required")
	}
	if cfg.Masters < 3 {
		return nil, fmt.Errorf("redisserver: a cluster needs at least 3 masters, not %d", cfg.Masters)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redisserver: redis-cli is not on PATH (apt-get install redis-tools): %w", err)
	}
	c := &Cluster{}
	for i := range cfg.Masters {
		dir := filepath.Join(cfg.Dir, "node"+strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			c.Close()
			return nil, err
		}
		s, err := startNode(Config{Dir: dir, Volatile: cfg.Volatile, Args: cfg.Args})
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	cmd := exec.CommandContext(ctx, cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...)
	cmd.SysProcAttr = procAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redisserver: redis-cli --cluster create: %w:\n%s", err, out)
	}
	if err := c.Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// startNode starts one node on two free TCP ports (client and bus),
// picking others if one was taken before the server could bind it.
func startNode(cfg Config) (*Server, error) {
	for attempt := 1; ; attempt++ {
		var err error
		if cfg.port, err = freePort(); err != nil {
			return nil, err
		}
		if cfg.busPort, err = freePort(); err != nil {
			return nil, err
		}
		if cfg.busPort == cfg.port {
			continue
		}
		s, err := Start(cfg)
		if err == nil || attempt == 5 || !addrInUse(err.Error()) {
			return s, err
		}
	}
}

// Addrs are the nodes' TCP addresses (host:port), node 0 first.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.TCPAddr()
	}
	return out
}

// Node is node i (0 ≤ i < Masters): its Do, Info, Stop, Kill9 and Log
// are Server's. After a Stop or a Kill9 bring it back with Restart.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// Len is the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Restart starts node i again on its directory and ports (after Stop or
// Kill9; a running node is stopped first) and waits until the cluster is
// whole again (Wait).
func (c *Cluster) Restart(i int) error {
	if err := c.nodes[i].Restart(); err != nil {
		return err
	}
	return c.Wait()
}

// Close stops every node and removes what Close of each removes.
func (c *Cluster) Close() {
	for _, s := range c.nodes {
		s.Close()
	}
}

// clusterPoll is how often Wait asks the nodes again.
const clusterPoll = 10 * time.Millisecond

// Wait waits until every node reports cluster_state:ok with every slot
// assigned and served, and every node sees the same masters (by id and
// address) owning the same slots, or until ReadyTimeout passes or a node
// exits.
func (c *Cluster) Wait() error {
	deadline := time.NewTimer(ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(clusterPoll)
	defer tick.Stop()
	var last error
	for {
		if last = c.whole(); last == nil {
			return nil
		}
		for i, s := range c.nodes {
			if !s.running() {
				return fmt.Errorf("redisserver: cluster node %d is not running (%v):\n%s", i, last, s.Log())
			}
		}
		select {
		case <-deadline.C:
			return fmt.Errorf("redisserver: the cluster is not whole within %v: %w", ReadyTimeout, last)
		case <-tick.C:
		}
	}
}

// whole says why the cluster is not yet whole, or nil.
func (c *Cluster) whole() error {
	var first string
	for i, s := range c.nodes {
		text, err := s.Do("CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER INFO: %w", i, err)
		}
		info := infoFields(text)
		for k, want := range map[string]string{"cluster_state": "ok", "cluster_slots_assigned": "16384",
			"cluster_slots_ok": "16384", "cluster_known_nodes": strconv.Itoa(len(c.nodes))} {
			if info[k] != want {
				return fmt.Errorf("node %d: CLUSTER INFO %s:%s, want %s", i, k, info[k], want)
			}
		}
		nodes, err := s.Do("CLUSTER", "NODES")
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER NODES: %w", i, err)
		}
		view, err := slotMap(nodes, len(c.nodes))
		if err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		if i == 0 {
			first = view
		} else if view != first {
			return fmt.Errorf("node %d sees the slots as\n%s\nnode 0 as\n%s", i, view, first)
		}
	}
	return nil
}

// slotMap is a node's view of who owns which slots, from CLUSTER NODES,
// as one line per master "ID HOST:PORT SLOTS…" in order: the same text on
// every node once they agree. A slot being migrated ([…] entries) is still
// its owner's. It fails if a node is failing, in handshake or without an
// address, or if there are not masters masters.
func slotMap(nodes string, masters int) (string, error) {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return "", fmt.Errorf("CLUSTER NODES line %q", line)
		}
		flags := strings.Split(f[2], ",")
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if slices.Contains(flags, bad) {
				return "", fmt.Errorf("node %s is %s", f[0], bad)
			}
		}
		if !slices.Contains(flags, "master") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		parts := []string{f[0], addr}
		for _, sl := range f[8:] {
			if !strings.HasPrefix(sl, "[") {
				parts = append(parts, sl)
			}
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	if len(lines) != masters {
		return "", fmt.Errorf("%d masters, want %d", len(lines), masters)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}
