package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// guard is a hang guard, not a timing assertion: a deadline that no correct
// run comes near, so that a broken proxy fails the test with a message
// instead of hanging until the go test timeout.
const guard = time.Minute

// quiet is how long a test listens for bytes that must not arrive. A
// timeout proves nothing on its own; the tests that use it also prove the
// bytes were discarded (probe) and never show up after Heal.
const quiet = 50 * time.Millisecond

// backend is a loopback server for the proxy to forward to. With a handler,
// it runs the handler per connection; without one, it hands every accepted
// connection to the test on conns.
type backend struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
	mu    sync.Mutex
	open  []net.Conn
	wg    sync.WaitGroup
}

func newBackend(t *testing.T, handle func(net.Conn)) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{ln: ln, conns: make(chan net.Conn, 16), done: make(chan struct{})}
	b.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.open = append(b.open, c)
			b.mu.Unlock()
			if handle != nil {
				b.wg.Go(func() { handle(c) })
				continue
			}
			select {
			case b.conns <- c:
			case <-b.done:
				return
			}
		}
	})
	t.Cleanup(func() {
		close(b.done)
		_ = ln.Close()
		b.mu.Lock()
		for _, c := range b.open {
			_ = c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }

// next returns the next connection the backend accepted (handler-less
// backends only).
func (b *backend) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-b.conns:
		if err := c.SetDeadline(time.Now().Add(guard)); err != nil {
			t.Fatal(err)
		}
		return c
	case <-time.After(guard):
		t.Fatal("backend accepted no connection")
		return nil
	}
}

// echo sends back what it receives; when the client half-closes, it
// finishes sending and closes, which lets a test see the FIN travel both
// ways.
func echo(c net.Conn) {
	_, _ = io.Copy(c, c)
	_ = c.Close()
}

// startProxy starts a Proxy to target that is closed when the test ends.
func startProxy(t *testing.T, target string, h hooks) *Proxy {
	t.Helper()
	p, err := newProxy(target, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// dial connects to addr, with the hang guard as deadline.
func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(time.Now().Add(guard)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

// send writes msg on w and requires r to read exactly msg next.
func send(t *testing.T, w, r net.Conn, msg string) {
	t.Helper()
	if _, err := w.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("read %q: %v", msg, err)
	}
	if !bytes.Equal(got, []byte(msg)) {
		t.Fatalf("read %q, want %q", got, msg)
	}
}

// roundTrip sends msg through an echo backend and requires it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	send(t, c, c, msg)
}

// probe records the proxy's copier events so a test can wait until a chunk
// has really been held or discarded instead of sleeping and hoping.
type probe struct {
	mu        sync.Mutex
	held      [2]int // chunks that started a Delay hold, by Direction-1
	discarded [2]int // bytes discarded, by Direction-1
	kick      chan struct{}
}

func newProbe() *probe { return &probe{kick: make(chan struct{}, 1)} }

func (pr *probe) hooks() hooks {
	return hooks{
		held: func(d Direction, _ int) {
			pr.mu.Lock()
			pr.held[d-1]++
			pr.mu.Unlock()
			pr.notify()
		},
		discarded: func(d Direction, n int) {
			pr.mu.Lock()
			pr.discarded[d-1] += n
			pr.mu.Unlock()
			pr.notify()
		},
	}
}

// notify never blocks: a pending kick already tells the waiter to look.
func (pr *probe) notify() {
	select {
	case pr.kick <- struct{}{}:
	default:
	}
}

func (pr *probe) wait(t *testing.T, what string, cond func(held, discarded [2]int) bool) {
	t.Helper()
	deadline := time.NewTimer(guard)
	defer deadline.Stop()
	for {
		pr.mu.Lock()
		ok := cond(pr.held, pr.discarded)
		pr.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-pr.kick:
		case <-deadline.C:
			t.Fatalf("proxy never %s", what)
		}
	}
}

func (pr *probe) waitHeld(t *testing.T, d Direction, chunks int) {
	t.Helper()
	pr.wait(t, "held the chunks", func(h, _ [2]int) bool { return h[d-1] >= chunks })
}

func (pr *probe) waitDiscarded(t *testing.T, d Direction, n int) {
	t.Helper()
	pr.wait(t, "discarded the bytes", func(_, x [2]int) bool { return x[d-1] >= n })
}

// requireReset connects to addr and requires the connection to be reset.
// The reset can arrive before the connect call has checked its socket, in
// which case the dial itself fails with ECONNRESET; otherwise the first
// read does.
func requireReset(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		defer c.Close()
		if err = c.SetDeadline(time.Now().Add(guard)); err != nil {
			t.Fatal(err)
		}
		var n int
		n, err = c.Read(make([]byte, 16))
		if n > 0 {
			t.Fatalf("read %d bytes from a connection that should be reset", n)
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %v, want ECONNRESET", err)
	}
}
