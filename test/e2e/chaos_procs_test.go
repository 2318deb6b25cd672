package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// chaosProc is one process of the suite (a replica or an executor) that
// the nemesis kills, pauses and starts again, possibly with a crash point
// armed. Its stderr goes to one log file across all its lives. Only the
// nemesis (one goroutine) starts, kills and restarts it; done is closed
// when the current life has been waited for.
type chaosProc struct {
	name string
	// command builds the process for its next life.
	command func() *exec.Cmd
	// ready is the stderr line that says it serves ("" : started is
	// enough).
	ready string
	log   *os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
	armed  string
}

// lineWatch closes found when a line containing want is written.
type lineWatch struct {
	want  string
	mu    sync.Mutex
	buf   []byte
	found chan struct{}
	seen  bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if strings.Contains(string(w.buf[:i]), w.want) {
			w.seen = true
			close(w.found)
			w.buf = nil
			break
		}
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// start begins a new life, with faults armed (TOLLGATE_FAULTS) when not
// "", and waits until it serves.
func (p *chaosProc) start(faults string) error {
	cmd := p.command()
	cmd.Env = append(cmd.Env, "TOLLGATE_FAULTS="+faults)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(p.log, "=== chaos: start %s (faults %q) at %s\n", p.name, faults, time.Now().Format(time.RFC3339Nano))
	var w *lineWatch
	cmd.Stdout = io.Discard
	cmd.Stderr = p.log
	if p.ready != "" {
		w = &lineWatch{want: p.ready, found: make(chan struct{})}
		cmd.Stderr = io.MultiWriter(p.log, w)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done, p.paused, p.armed = cmd, done, false, faults
	p.mu.Unlock()
	if w == nil {
		return nil
	}
	select {
	case <-w.found:
		return nil
	case <-done:
		return fmt.Errorf("%s exited before serving (see %s)", p.name, p.log.Name())
	case <-time.After(60 * time.Second):
		p.kill()
		return fmt.Errorf("%s did not serve within a minute (see %s)", p.name, p.log.Name())
	}
}

// alive reports whether the current life is running.
func (p *chaosProc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process group (an executor's MCP servers
// die with it) and waits for the life to end.
func (p *chaosProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.paused = false
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// pause stops (SIGSTOP) or continues (SIGCONT) the process group.
func (p *chaosProc) pause(stop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	p.paused = stop
}

// freePorts reserves n distinct loopback ports (closed again at once: a
// replica restarts on the same ports, which the proxies point at). They
// are taken below the kernel's ephemeral range, so a port the chaos
// replicas will bind again is never handed to another test's listener on
// port 0 or to an outgoing connection meanwhile (CI once saw a replica
// fail to start: "bind: address already in use").
func freePorts(n int) ([]int, error) {
	low := 32768 // Linux's default ip_local_port_range starts here
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	const base = 10000
	if low-base < 1000 {
		return nil, fmt.Errorf("the ephemeral port range starts at %d: no room below it for the chaos replicas' ports", low)
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 10000 {
			return nil, fmt.Errorf("found %d free loopback ports in [%d, %d), wanted %d", len(ports), base, low, n)
		}
		p := base + rand.IntN(low-base)
		l, err := net.Listen("tcp", loopback(p))
		if err != nil {
			continue // taken (by a listener here, or one of ours already)
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	return ports, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
