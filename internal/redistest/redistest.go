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
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is not on PATH; CI must install it (apt-get install redis-server): %v", err)
		}
		t.Skipf("redis-server is not on PATH: %v", err)
	}
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
