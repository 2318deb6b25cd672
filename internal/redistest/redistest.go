package redistest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/redisserver"
)

// Option changes how the server is started.
type Option func(*redisserver.Config)

// Volatile starts the server with --appendonly no: nothing is kept on disk.
func Volatile() Option { return func(c *redisserver.Config) { c.Volatile = true } }

// Cluster starts the server in cluster mode as a one-node cluster that owns
// every slot, so Redis itself refuses any command or script whose keys
// span more than one slot.
func Cluster() Option { return func(c *redisserver.Config) { c.Cluster = true } }

// Args adds redis-server command-line arguments (e.g. "--maxmemory", "1gb").
func Args(args ...string) Option {
	return func(c *redisserver.Config) { c.Args = append(c.Args, args...) }
}

// Server is a running (or stopped) redis-server owned by one test: Addr,
// URL, Dir, Log, Do, Info, CPU, Stop and Kill9 are redisserver's.
type Server struct {
	*redisserver.Server
	t testing.TB
}

// Start starts a redis-server in a temporary directory and waits until it
// answers PING. The server is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	need(t, "redis-server")
	cfg := redisserver.Config{Dir: t.TempDir()}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := redisserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &Server{Server: s, t: t}
}

// need skips the test if prog is not on PATH, or fails it under CI=true.
func need(t testing.TB, prog string) {
	t.Helper()
	if _, err := exec.LookPath(prog); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not on PATH; CI must install it (apt-get install redis-server redis-tools): %v", prog, err)
		}
		t.Skipf("%s is not on PATH: %v", prog, err)
	}
}

// Restart starts the server again on the same directory and socket (after
// Stop or Kill9; a running server is stopped first) and waits until it
// answers PING, which it does only once its append-only file is loaded. It
// fails the test if the server does not come back.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.Server.Restart(); err != nil {
		s.t.Fatal(err)
	}
}

// ClusterNodes is a running Redis Cluster of several masters owned by one
// test: Addrs, Node, Len, Wait and Close are redisserver.Cluster's.
type ClusterNodes struct {
	*redisserver.Cluster
	t testing.TB
}

// StartCluster starts a Redis Cluster of masters masters (at least 3, no
// replicas) on loopback TCP ports, in temporary directories, each with an
// append-only file fsynced on every write, and waits until every node
// serves and agrees on who owns which slot. Volatile and Args apply to
// every node (Cluster, the one-node cluster, does not: it fails the test).
// The nodes are stopped when the test ends. Without redis-server and
// redis-cli on PATH the test skips (under CI=true it fails).
func StartCluster(t testing.TB, masters int, opts ...Option) *ClusterNodes {
	t.Helper()
	need(t, "redis-server")
	need(t, "redis-cli")
	var cfg redisserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Cluster {
		t.Fatal("redistest: StartCluster takes no Cluster option (that is the one-node cluster of Start)")
	}
	c, err := redisserver.StartCluster(redisserver.ClusterConfig{Dir: t.TempDir(), Masters: masters, Volatile: cfg.Volatile, Args: cfg.Args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &ClusterNodes{Cluster: c, t: t}
}

// Kill9 kills node i with SIGKILL and waits for it to be gone.
func (c *ClusterNodes) Kill9(i int) { c.Node(i).Kill9() }

// Restart starts node i again (after Kill9 or Node(i).Stop) and waits until
// the cluster is whole again; it fails the test if it is not.
func (c *ClusterNodes) Restart(i int) {
	c.t.Helper()
	if err := c.Cluster.Restart(i); err != nil {
		c.t.Fatal(err)
	}
}
