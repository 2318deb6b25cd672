// Package redistest starts a private redis-server for a test: its own
// directory, a unix socket and no TCP port, an append-only file fsynced on
// every write, and stopped when the test ends. Tests that need Redis call
// Start; without redis-server on PATH they skip, except under CI=true,
// where they fail (CI never skips silently).
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyTimeout bounds how long Start and Restart wait for the server to
// answer PING (loading a large append-only file takes a while).
const readyTimeout = 30 * time.Second

type options struct {
	volatile bool
	cluster  bool
	args     []string
}

// Option changes how the server is started.
type Option func(*options)

// Volatile starts the server with --appendonly no: nothing is kept on disk.
func Volatile() Option { return func(o *options) { o.volatile = true } }

// Cluster starts the server in cluster mode as a one-node cluster that owns
// every slot, so Redis itself refuses any command or script whose keys
// span more than one slot.
func Cluster() Option { return func(o *options) { o.cluster = true } }

// Args adds redis-server command-line arguments (e.g. "--maxmemory", "1gb").
func Args(args ...string) Option { return func(o *options) { o.args = append(o.args, args...) } }

// Server is a running (or stopped) redis-server owned by one test.
type Server struct {
	t    testing.TB
	opts options
	dir  string
	sock string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	log  *lockedBuffer
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
	s := &Server{t: t, dir: t.TempDir()}
	for _, o := range opts {
		o(&s.opts)
	}
	s.sock = filepath.Join(s.dir, "r.sock")
	if len(s.sock) > 100 { // sun_path is 108 bytes
		short, err := os.MkdirTemp("", "rt")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(short) })
		s.sock = filepath.Join(short, "r.sock")
	}
	t.Cleanup(s.Stop)
	s.start()
	if s.opts.cluster {
		if _, err := s.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
			t.Fatalf("redistest: claiming the cluster slots: %v", err)
		}
		s.waitCluster()
	}
	return s
}

// waitCluster waits until the one-node cluster serves (Redis holds a
// fresh master back for 2 s).
func (s *Server) waitCluster() {
	s.t.Helper()
	s.waitFor("cluster_state:ok", func() (bool, error) {
		info, err := s.Do("CLUSTER", "INFO")
		return strings.Contains(info, "cluster_state:ok"), err
	})
}

// Addr is the server's unix socket path.
func (s *Server) Addr() string { return s.sock }

// URL is the server's address as a redis URL (unix://PATH).
func (s *Server) URL() string { return "unix://" + s.sock }

// Dir is the server's data directory (the append-only files live here).
func (s *Server) Dir() string { return s.dir }

// Log returns what the server has printed so far.
func (s *Server) Log() string {
	s.mu.Lock()
	l := s.log
	s.mu.Unlock()
	if l == nil {
		return ""
	}
	return l.String()
}

func (s *Server) args(clusterPort int) []string {
	a := []string{
		"--port", "0",
		"--unixsocket", s.sock, "--unixsocketperm", "700",
		"--dir", s.dir,
		"--save", "",
		"--daemonize", "no",
		"--appendfsync", "always",
	}
	if s.opts.volatile {
		a = append(a, "--appendonly", "no")
	} else {
		a = append(a, "--appendonly", "yes")
	}
	if s.opts.cluster {
		// The cluster bus needs a TCP port (by default port+10000, here
		// 10000 for every server): give it a free one on loopback.
		a = append(a, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--bind", "127.0.0.1", "--cluster-port", strconv.Itoa(clusterPort))
	}
	return append(a, s.opts.args...)
}

func (s *Server) start() {
	s.t.Helper()
	for attempt := 1; ; attempt++ {
		err := s.launch()
		if err == nil {
			return
		}
		// A free port picked for the cluster bus can be taken before the
		// server binds it: pick another.
		if !s.opts.cluster || attempt == 5 || !strings.Contains(s.Log(), "Address already in use") {
			s.t.Fatal(err)
		}
	}
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("redistest: the server is already running")
	}
	port := 0
	if s.opts.cluster {
		var err error
		if port, err = freePort(); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	cmd := exec.Command("redis-server", s.args(port)...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = procAttr()
	s.log = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	err := s.poll("PONG", func() (bool, error) {
		reply, err := s.Do("PING")
		return err == nil && reply == "PONG", nil
	})
	if err != nil {
		s.Kill9()
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls cond until it holds, and fails the test if it does not.
func (s *Server) waitFor(what string, cond func() (bool, error)) {
	s.t.Helper()
	if err := s.poll(what, cond); err != nil {
		s.t.Fatal(err)
	}
}

// poll checks cond every few milliseconds until it holds, the process
// exits or readyTimeout passes.
func (s *Server) poll(what string, cond func() (bool, error)) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-done:
			return fmt.Errorf("redistest: redis-server exited before %s:\n%s", what, s.Log())
		case <-deadline.C:
			return fmt.Errorf("redistest: no %s from redis-server within %v (last error: %v):\n%s", what, readyTimeout, last, s.Log())
		case <-tick.C:
		}
	}
}

// Stop shuts the server down gracefully (SIGTERM: it flushes and exits)
// and waits for it. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill9 kills the server with SIGKILL, as a crash would, and waits for it
// to be gone. Only what was fsynced survives.
func (s *Server) Kill9() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts the server again on the same directory and socket (after
// Stop or Kill9; a running server is stopped first) and waits until it
// answers PING, which it does only once its append-only file is loaded.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
	if s.opts.cluster {
		s.waitCluster() // the slots are in nodes.conf
	}
}

// Do sends one command over a fresh connection and returns the reply as
// text: a status or bulk string, an integer in decimal, or the elements of
// an array joined by newlines. A Redis error reply is returned as an error.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("unix", s.sock, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		var parts []string
		for range n {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
