package redisserver

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
	"time"
)

// ReadyTimeout bounds how long Start and Restart wait for the server to
// answer PING (loading a large append-only file takes a while).
const ReadyTimeout = 30 * time.Second

// Config says how to start the server.
type Config struct {
	// Dir is the server's data directory (its append-only files); it must
	// exist. The socket is Dir/r.sock, or a short path of its own in the
	// system's temporary directory when that is too long for a socket.
	Dir string
	// Volatile starts the server with --appendonly no: nothing is kept on
	// disk.
	Volatile bool
	// Cluster starts the server as a one-node cluster that owns every
	// slot, so Redis itself refuses any command or script whose keys span
	// more than one slot.
	Cluster bool
	// Args are more redis-server arguments, after (so overriding) the
	// defaults, e.g. "--appendfsync", "everysec".
	Args []string

	// port and busPort, when port is not 0, make the server a node of a
	// multi-node cluster (StartCluster; Cluster is then false): it serves
	// TCP on 127.0.0.1:port (the address it announces to clients), talks
	// to the other nodes on busPort and claims no slot itself. Both stay
	// across restarts, since the other nodes know the node by them.
	port, busPort int
}

// Server is a running (or stopped) redis-server.
type Server struct {
	cfg      Config
	sock     string
	shortDir string // holds sock when Dir was too long for it; removed by Close

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	log  *lockedBuffer
}

// Start starts redis-server (from PATH) in cfg.Dir and waits until it
// answers PING (and, for a cluster, serves). Close it when done.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("redisserver: a data directory is required")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redisserver: redis-server is not on PATH (apt-get install redis-server): %w", err)
	}
	s := &Server{cfg: cfg, sock: filepath.Join(cfg.Dir, "r.sock")}
	if len(s.sock) > 100 { // sun_path is 108 bytes
		short, err := os.MkdirTemp("", "rt")
		if err != nil {
			return nil, err
		}
		s.shortDir, s.sock = short, filepath.Join(short, "r.sock")
	}
	if err := s.start(); err != nil {
		s.Close()
		return nil, err
	}
	if cfg.Cluster {
		if _, err := s.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
			s.Close()
			return nil, fmt.Errorf("redisserver: claiming the cluster slots: %w", err)
		}
		if err := s.waitCluster(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// waitCluster waits until the one-node cluster serves (Redis holds a fresh
// master back for 2 s).
func (s *Server) waitCluster() error {
	return s.poll("cluster_state:ok", func() (bool, error) {
		info, err := s.Do("CLUSTER", "INFO")
		return strings.Contains(info, "cluster_state:ok"), err
	})
}

// Addr is the server's unix socket path.
func (s *Server) Addr() string { return s.sock }

// TCPAddr is the server's TCP address (host:port) if it has one (a node
// of a cluster StartCluster started), else "".
func (s *Server) TCPAddr() string {
	if s.cfg.port == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cfg.port))
}

// URL is the server's address as a redis URL (unix://PATH).
func (s *Server) URL() string { return "unix://" + s.sock }

// Dir is the server's data directory (the append-only files live here).
func (s *Server) Dir() string { return s.cfg.Dir }

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
		"--port", strconv.Itoa(s.cfg.port),
		"--unixsocket", s.sock, "--unixsocketperm", "700",
		"--dir", s.cfg.Dir,
		"--save", "",
		"--daemonize", "no",
		"--appendfsync", "always",
	}
	if s.cfg.Volatile {
		a = append(a, "--appendonly", "no")
	} else {
		a = append(a, "--appendonly", "yes")
	}
	if s.cfg.Cluster || s.cfg.port != 0 {
		// The cluster bus needs a TCP port (by default port+10000, here
		// 10000 for every one-node cluster): give it a free one on
		// loopback.
		a = append(a, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.cfg.Dir, "nodes.conf"),
			"--bind", "127.0.0.1", "--cluster-port", strconv.Itoa(clusterPort))
	}
	return append(a, s.cfg.Args...)
}

func (s *Server) start() error {
	for attempt := 1; ; attempt++ {
		err := s.launch()
		if err == nil {
			return nil
		}
		// A free port picked for the cluster bus can be taken before the
		// server binds it: pick another. (A node of a multi-node cluster
		// keeps its ports: StartCluster picks them again.)
		if !s.cfg.Cluster || attempt == 5 || !addrInUse(s.Log()) {
			return err
		}
	}
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("redisserver: the server is already running")
	}
	port := s.cfg.busPort
	if s.cfg.Cluster {
		var err error
		if port, err = freePort(); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	cmd := exec.Command("redis-server", s.args(port)...)
	cmd.Dir = s.cfg.Dir
	cmd.SysProcAttr = procAttr()
	s.log = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("redisserver: starting redis-server: %w", err)
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

func addrInUse(log string) bool { return strings.Contains(log, "Address already in use") }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// poll checks cond every few milliseconds until it holds, the process
// exits or ReadyTimeout passes.
func (s *Server) poll(what string, cond func() (bool, error)) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	deadline := time.NewTimer(ReadyTimeout)
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
			return fmt.Errorf("redisserver: redis-server exited before %s:\n%s", what, s.Log())
		case <-deadline.C:
			return fmt.Errorf("redisserver: no %s from redis-server within %v (last error: %v):\n%s", what, ReadyTimeout, last, s.Log())
		case <-tick.C:
		}
	}
}

// running says whether the process is up (started and not exited).
func (s *Server) running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Stop shuts the server down gracefully (SIGTERM: it flushes and exits)
// and waits for it. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill9 kills the server with SIGKILL, as a crash would, and waits for it
// to be gone. Only what was fsynced survives.
func (s *Server) Kill9() { s.signal(syscall.SIGKILL) }

// Close stops the server and removes the socket directory it made, if
// any; the data directory is the caller's.
func (s *Server) Close() {
	s.Stop()
	if s.shortDir != "" {
		os.RemoveAll(s.shortDir)
	}
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	t := time.NewTimer(ReadyTimeout)
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
func (s *Server) Restart() error {
	s.Stop()
	if err := s.start(); err != nil {
		return err
	}
	if s.cfg.Cluster {
		return s.waitCluster() // the slots are in nodes.conf
	}
	return nil
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

// Info returns one section of INFO as a map of its fields.
func (s *Server) Info(section string) (map[string]string, error) {
	text, err := s.Do("INFO", section)
	if err != nil {
		return nil, err
	}
	return infoFields(text), nil
}

// infoFields reads the "key:value" lines of INFO or CLUSTER INFO.
func infoFields(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// CPU is the server's user + system CPU time so far (INFO cpu).
func (s *Server) CPU() (time.Duration, error) {
	info, err := s.Info("cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		f, err := strconv.ParseFloat(info[k], 64)
		if err != nil {
			return 0, fmt.Errorf("redisserver: INFO cpu %s=%q: %w", k, info[k], err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redisserver: empty reply")
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
	return "", fmt.Errorf("redisserver: unexpected reply %q", line)
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
