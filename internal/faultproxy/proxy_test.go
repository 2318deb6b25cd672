package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestNewTarget(t *testing.T) {
	tests := []struct {
		target string
		ok     bool
	}{
		{"127.0.0.1:6379", true},
		{"127.1.2.3:6379", true},
		{"localhost:6379", true},
		{"LOCALHOST:6379", true},
		{"[::1]:6379", true},
		{"[::ffff:127.0.0.1]:6379", true},
		{"10.0.0.1:6379", false},
		{"8.8.8.8:53", false},
		{"0.0.0.0:6379", false},
		{"[::]:6379", false},
		{":6379", false},
		{"127.0.0.1", false},
		{"127.0.0.1:0", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:redis", false},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			p, err := New(tt.target)
			if (err == nil) != tt.ok {
				t.Fatalf("New(%q) error = %v, want ok = %v", tt.target, err, tt.ok)
			}
			if p == nil {
				return
			}
			if host, _, err := net.SplitHostPort(p.Addr()); err != nil || host != "127.0.0.1" {
				t.Errorf("Addr() = %q, want 127.0.0.1:port", p.Addr())
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestForward(t *testing.T) {
	tests := []struct {
		name string
		size int
	}{
		{"small", 5},
		{"many chunks", 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, echo)
			p := startProxy(t, b.addr(), hooks{})
			c := dial(t, p.Addr())

			payload := make([]byte, tt.size)
			for i := range payload {
				payload[i] = byte(i * 7)
			}
			// Write concurrently: an echo backend cannot absorb a large
			// payload unless someone reads the echo at the same time.
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write(payload)
				werr <- err
			}()
			got := make([]byte, tt.size)
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, payload) {
				t.Fatal("echoed bytes differ from the payload")
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			s := p.Stats()
			want := Stats{Accepted: 1, ForwardedUp: uint64(tt.size), ForwardedDown: uint64(tt.size)}
			if s != want {
				t.Errorf("Stats() = %+v, want %+v", s, want)
			}
		})
	}
}

// TestHalfClose checks that a FIN crosses the proxy in both directions
// while the other direction keeps flowing.
func TestHalfClose(t *testing.T) {
	b := newBackend(t, echo)
	p := startProxy(t, b.addr(), hooks{})
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c) // ends only if the backend saw our FIN and its own came back
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "last words" {
		t.Fatalf("read %q, want %q", got, "last words")
	}
}

func TestDelay(t *testing.T) {
	const d = 50 * time.Millisecond
	tests := []struct {
		name      string
		openFirst bool // connect and use the connection before the delay starts
	}{
		{"new connection", false},
		{"open connection", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, echo)
			p := startProxy(t, b.addr(), hooks{})
			var c net.Conn
			if tt.openFirst {
				c = dial(t, p.Addr())
				roundTrip(t, c, "before")
			}
			p.Delay(d)
			if got := p.Mode(); got != "delay 50ms" {
				t.Errorf("Mode() = %q", got)
			}
			if c == nil {
				c = dial(t, p.Addr())
			}
			start := time.Now()
			roundTrip(t, c, "delayed")
			// Held d upstream, then d downstream.
			if took := time.Since(start); took < 2*d {
				t.Fatalf("round trip took %v, want at least %v", took, 2*d)
			}
		})
	}
}

// TestDelayHeldChunkRejudged checks that a chunk held by a long Delay is
// re-judged as soon as the mode changes, instead of sleeping out the delay.
func TestDelayHeldChunkRejudged(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Proxy)
		lost   bool // the held chunk is discarded rather than delivered
	}{
		{"heal delivers", (*Proxy).Heal, false},
		{"shorter delay delivers", func(p *Proxy) { p.Delay(time.Nanosecond) }, false},
		{"oneway other direction delivers", func(p *Proxy) { p.OneWay(Downstream) }, false},
		{"blackhole discards", (*Proxy).BlackHole, true},
		{"oneway same direction discards", func(p *Proxy) { p.OneWay(Upstream) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, nil)
			pr := newProbe()
			p := startProxy(t, b.addr(), pr.hooks())
			c := dial(t, p.Addr())
			s := b.next(t)

			p.Delay(time.Hour)
			if _, err := c.Write([]byte("held")); err != nil {
				t.Fatal(err)
			}
			pr.waitHeld(t, Upstream, 1)
			tt.change(p)
			if tt.lost {
				pr.waitDiscarded(t, Upstream, len("held"))
				p.Heal()
				send(t, c, s, "next") // exactly "next": "held" never arrives
				return
			}
			got := make([]byte, len("held"))
			if _, err := io.ReadFull(s, got); err != nil {
				t.Fatal(err)
			}
			if string(got) != "held" {
				t.Fatalf("backend read %q, want %q", got, "held")
			}
		})
	}
}

func TestBlackHole(t *testing.T) {
	b := newBackend(t, echo)
	pr := newProbe()
	p := startProxy(t, b.addr(), pr.hooks())
	before := dial(t, p.Addr())
	roundTrip(t, before, "hello")

	p.BlackHole()
	if _, err := before.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	pr.waitDiscarded(t, Upstream, len("lost"))
	if err := before.SetReadDeadline(time.Now().Add(quiet)); err != nil {
		t.Fatal(err)
	}
	if n, err := before.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during black hole = %d, %v; want a deadline timeout", n, err)
	}
	if err := before.SetReadDeadline(time.Now().Add(guard)); err != nil {
		t.Fatal(err)
	}

	// A connection made during the black hole is accepted and kept open.
	during := dial(t, p.Addr())
	if _, err := during.Write([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	pr.waitDiscarded(t, Upstream, len("lost")+len("gone"))

	p.Heal()
	// Both connections work again; their black-holed bytes stay lost, so
	// each reads back exactly what it sends now.
	roundTrip(t, before, "kept")
	roundTrip(t, during, "works")
	roundTrip(t, dial(t, p.Addr()), "fresh")

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.DiscardedUp != uint64(len("lost")+len("gone")) || s.DiscardedDown != 0 {
		t.Errorf("Stats() = %+v", s)
	}
}

func TestDrop(t *testing.T) {
	for _, open := range []bool{true, false} {
		t.Run(map[bool]string{true: "open connection", false: "new connection"}[open], func(t *testing.T) {
			b := newBackend(t, echo)
			p := startProxy(t, b.addr(), hooks{})
			var c net.Conn
			if open {
				c = dial(t, p.Addr())
				roundTrip(t, c, "hello")
			}
			p.Drop()
			if c == nil {
				c = dial(t, p.Addr())
			}
			if n, err := c.Read(make([]byte, 16)); err != io.EOF {
				t.Fatalf("read after Drop = %d, %v; want EOF", n, err)
			}
			p.Heal()
			roundTrip(t, dial(t, p.Addr()), "healed")
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if s := p.Stats(); s.Drops != 1 || s.Accepted != 2 {
				t.Errorf("Stats() = %+v, want Drops 1, Accepted 2", s)
			}
		})
	}
}

func TestReset(t *testing.T) {
	for _, open := range []bool{true, false} {
		t.Run(map[bool]string{true: "open connection", false: "new connection"}[open], func(t *testing.T) {
			b := newBackend(t, echo)
			p := startProxy(t, b.addr(), hooks{})
			var c net.Conn
			if open {
				c = dial(t, p.Addr())
				roundTrip(t, c, "hello")
			}
			p.Reset()
			if c != nil {
				if n, err := c.Read(make([]byte, 16)); !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("read after Reset = %d, %v; want ECONNRESET", n, err)
				}
			} else {
				requireReset(t, p.Addr())
			}
			p.Heal()
			roundTrip(t, dial(t, p.Addr()), "healed")
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if s := p.Stats(); s.Resets != 1 || s.Accepted != 2 {
				t.Errorf("Stats() = %+v, want Resets 1, Accepted 2", s)
			}
		})
	}
}

func TestOneWay(t *testing.T) {
	for _, dir := range []Direction{Upstream, Downstream} {
		t.Run(dir.String(), func(t *testing.T) {
			b := newBackend(t, nil)
			pr := newProbe()
			p := startProxy(t, b.addr(), pr.hooks())
			c := dial(t, p.Addr())
			s := b.next(t)
			send(t, c, s, "hi")
			send(t, s, c, "greeting")

			p.OneWay(dir)
			if got, want := p.Mode(), "oneway "+dir.String(); got != want {
				t.Errorf("Mode() = %q, want %q", got, want)
			}
			from, to := net.Conn(c), s // the partitioned direction
			if dir == Downstream {
				from, to = s, c
			}
			if _, err := from.Write([]byte("lost")); err != nil {
				t.Fatal(err)
			}
			pr.waitDiscarded(t, dir, len("lost"))
			if err := to.SetReadDeadline(time.Now().Add(quiet)); err != nil {
				t.Fatal(err)
			}
			if n, err := to.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read across the partition = %d, %v; want a deadline timeout", n, err)
			}
			if err := to.SetReadDeadline(time.Now().Add(guard)); err != nil {
				t.Fatal(err)
			}
			send(t, to, from, "still flows") // the other direction

			p.Heal()
			send(t, from, to, "back") // exactly "back": "lost" never arrives
		})
	}
}

// TestDialError checks that a client whose target cannot be reached is
// reset, as a refused connect would be.
func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	if err := ln.Close(); err != nil { // now nothing listens there
		t.Fatal(err)
	}
	p := startProxy(t, target, hooks{})
	requireReset(t, p.Addr())
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.DialErrors != 1 || s.Accepted != 1 {
		t.Errorf("Stats() = %+v, want DialErrors 1, Accepted 1", s)
	}
}

// TestClose checks that Close with connections open (one of them holding a
// chunk in an hour-long Delay) returns, closes them, and is idempotent;
// TestMain's goleak check proves no goroutine survives it.
func TestClose(t *testing.T) {
	b := newBackend(t, echo)
	pr := newProbe()
	p := startProxy(t, b.addr(), pr.hooks())
	var conns []net.Conn
	for i := range 3 {
		c := dial(t, p.Addr())
		roundTrip(t, c, fmt.Sprint("conn ", i))
		conns = append(conns, c)
	}
	p.Delay(time.Hour)
	if _, err := conns[0].Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	pr.waitHeld(t, Upstream, 1)

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	for i, c := range conns {
		if n, err := c.Read(make([]byte, 16)); err == nil {
			t.Errorf("conn %d: read %d bytes after Close, want an error", i, n)
		}
	}
	if s := p.Stats(); s.Active != 0 {
		t.Errorf("Active = %d after Close", s.Active)
	}
	p.Reset() // fault methods stay callable after Close
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMode(t *testing.T) {
	tests := []struct {
		set  func(*Proxy)
		want string
	}{
		{func(*Proxy) {}, "heal"},
		{func(p *Proxy) { p.Delay(200 * time.Millisecond) }, "delay 200ms"},
		{func(p *Proxy) { p.Delay(0) }, "heal"},
		{(*Proxy).BlackHole, "blackhole"},
		{(*Proxy).Drop, "drop"},
		{(*Proxy).Reset, "reset"},
		{func(p *Proxy) { p.OneWay(Upstream) }, "oneway upstream"},
		{func(p *Proxy) { p.OneWay(Downstream) }, "oneway downstream"},
		{func(p *Proxy) { p.BlackHole(); p.Heal() }, "heal"},
	}
	p := startProxy(t, "127.0.0.1:6379", hooks{})
	for _, tt := range tests {
		p.Heal()
		tt.set(p)
		if got := p.Mode(); got != tt.want {
			t.Errorf("Mode() = %q, want %q", got, tt.want)
		}
	}
}

func TestOneWayPanicsOnBadDirection(t *testing.T) {
	p := startProxy(t, "127.0.0.1:6379", hooks{})
	defer func() {
		if recover() == nil {
			t.Error("OneWay(0) did not panic")
		}
		if got := p.Mode(); got != "heal" {
			t.Errorf("Mode() = %q after the panic, want heal", got)
		}
	}()
	p.OneWay(0)
}

// TestChurn flips through every mode while clients keep talking, for the
// race detector and the leak check; afterwards the proxy must still work.
func TestChurn(t *testing.T) {
	b := newBackend(t, echo)
	p := startProxy(t, b.addr(), hooks{})
	modes := []func(){
		p.Heal, func() { p.Delay(time.Millisecond) }, p.BlackHole,
		func() { p.OneWay(Upstream) }, func() { p.OneWay(Downstream) }, p.Drop, p.Reset,
	}
	const clients = 8
	attempts := make(chan struct{}, clients)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			var c net.Conn
			defer func() {
				if c != nil {
					_ = c.Close()
				}
			}()
			buf := make([]byte, 64)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = net.Dial("tcp", p.Addr()); err != nil {
						if !errors.Is(err, syscall.ECONNRESET) { // Reset may beat the connect
							t.Errorf("dial: %v", err)
							return
						}
						c = nil
						continue
					}
				}
				// Faults make failures expected here; a failed or garbled
				// exchange just means starting over on a new connection.
				msg := fmt.Sprintf("client %d message %d", i, n)
				_ = c.SetDeadline(time.Now().Add(20 * time.Millisecond))
				_, err := c.Write([]byte(msg))
				if err == nil {
					_, err = io.ReadFull(c, buf[:len(msg)])
				}
				if err != nil || string(buf[:len(msg)]) != msg {
					_ = c.Close()
					c = nil
				}
				select {
				case attempts <- struct{}{}:
				default:
				}
			}
		})
	}
	hang := time.NewTimer(guard)
	defer hang.Stop()
	for range 3 {
		for _, set := range modes {
			set()
			for range clients { // let the clients make progress under this mode
				select {
				case <-attempts:
				case <-hang.C:
					t.Fatal("clients stopped making attempts")
				}
			}
		}
	}
	p.Heal()
	close(stop)
	wg.Wait()
	for range clients {
		roundTrip(t, dial(t, p.Addr()), "after the churn")
	}
}
