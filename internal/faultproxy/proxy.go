package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// chunkSize bounds one read, hence the memory one direction of one
	// connection can hold.
	chunkSize = 32 << 10
	// dialTimeout bounds a dial to the target, which on loopback either
	// succeeds or is refused at once unless the target's backlog is full.
	dialTimeout = 10 * time.Second
	// resolveTimeout bounds resolving a target name in New.
	resolveTimeout = 5 * time.Second
	// acceptBackoff is the pause after an Accept error other than the
	// listener being closed (e.g. EMFILE), so the loop does not spin.
	acceptBackoff = 10 * time.Millisecond
)

// Proxy forwards TCP connections from its loopback listener to one target,
// applying the current fault mode. Its methods are safe for concurrent use.
type Proxy struct {
	target string // host:port dialed for every accepted connection
	ln     *net.TCPListener
	dialer net.Dialer
	hooks  hooks

	// ctx is canceled by Close; it aborts dials in progress and the accept
	// backoff.
	ctx    context.Context
	cancel context.CancelFunc

	mode atomic.Pointer[mode] // never nil; read per chunk without locking

	mu     sync.Mutex         // guards links and closed, and orders mode changes against registration
	links  map[*link]struct{} // connections being forwarded
	closed bool

	wg        sync.WaitGroup // every goroutine the Proxy started
	closeOnce func() error   // Close's body, run once

	accepted, dialErrors, drops, resets atomic.Uint64
	forwarded, discarded                [2]atomic.Uint64 // indexed by Direction-1
}

// hooks let tests observe the copiers at points they cannot otherwise wait
// on. They are set only at construction; nil hooks are skipped. A hook runs
// on a copier goroutine and must not block.
type hooks struct {
	held      func(dir Direction, n int) // a chunk (n == 0: an end of stream) starts a Delay hold
	discarded func(dir Direction, n int) // n bytes were read and discarded
}

// Stats is a snapshot of a Proxy's counters. Byte counters count what was
// written to (Forwarded) or read and thrown away instead of being written to
// (Discarded) the far side; Up is client to target, Down target to client.
type Stats struct {
	Accepted   uint64 // connections accepted by the listener
	Active     int    // connections currently linked to the target
	DialErrors uint64 // accepted connections whose dial to the target failed (the client was reset)
	Drops      uint64 // connections closed by Drop, new or open
	Resets     uint64 // connections reset by Reset, new or open

	ForwardedUp, ForwardedDown uint64
	DiscardedUp, DiscardedDown uint64
}

// New listens on 127.0.0.1:0 and forwards every accepted connection to
// target (host:port), which must be a loopback address or "localhost"; see
// the package documentation. The caller must Close the Proxy.
func New(target string) (*Proxy, error) { return newProxy(target, hooks{}) }

func newProxy(target string, h hooks) (*Proxy, error) {
	dialTo, err := loopbackTarget(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: dialTo,
		ln:     ln,
		dialer: net.Dialer{Timeout: dialTimeout},
		hooks:  h,
		ctx:    ctx,
		cancel: cancel,
		links:  make(map[*link]struct{}),
	}
	p.mode.Store(&mode{kind: kindHeal, changed: make(chan struct{})})
	p.closeOnce = sync.OnceValue(p.shutdown)
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// loopbackTarget checks that target names a loopback host and a port, and
// returns the address to dial: target itself for "localhost" or a literal
// address, else the name's first resolved address, so that the name cannot
// resolve elsewhere later.
func loopbackTarget(target string) (string, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("faultproxy: target %q: port must be a number from 1 to 65535", target)
	}
	if host == "" {
		return "", fmt.Errorf("faultproxy: target %q: host required", target)
	}
	if strings.EqualFold(host, "localhost") {
		return target, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.IsLoopback() {
			return "", fmt.Errorf("faultproxy: target %q is not a loopback address", target)
		}
		return target, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("faultproxy: target %q: no addresses", target)
	}
	for _, a := range addrs {
		if !a.IsLoopback() {
			return "", fmt.Errorf("faultproxy: target %q resolves to %v, which is not a loopback address", target, a)
		}
	}
	return net.JoinHostPort(addrs[0].Unmap().WithZone("").String(), port), nil
}

// Addr returns the listen address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection (client and target side)
// and waits until every goroutine the Proxy started has returned. It is
// idempotent and safe to call concurrently: every call waits for the first
// to finish and returns its result (the listener's close error). Fault
// methods and Stats remain callable after Close and have no effect beyond
// recording the mode.
func (p *Proxy) Close() error { return p.closeOnce() }

func (p *Proxy) shutdown() error {
	p.cancel()
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for l := range p.links {
		l.shut(false)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// Stats returns a snapshot of the counters. The counters are read one by
// one, so a snapshot taken while traffic flows need not be consistent
// across fields; after Close it is final.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := len(p.links)
	p.mu.Unlock()
	return Stats{
		Accepted:      p.accepted.Load(),
		Active:        active,
		DialErrors:    p.dialErrors.Load(),
		Drops:         p.drops.Load(),
		Resets:        p.resets.Load(),
		ForwardedUp:   p.forwarded[Upstream-1].Load(),
		ForwardedDown: p.forwarded[Downstream-1].Load(),
		DiscardedUp:   p.discarded[Upstream-1].Load(),
		DiscardedDown: p.discarded[Downstream-1].Load(),
	}
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			t := time.NewTimer(acceptBackoff)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		p.accepted.Add(1)
		// Drop and Reset refuse here, without dialing the target, so the
		// target never sees connections it would only lose. Counters are
		// bumped before the close so a client that sees the close also
		// sees the count.
		switch p.mode.Load().kind {
		case kindDrop:
			p.drops.Add(1)
			_ = c.Close()
			continue
		case kindReset:
			p.resets.Add(1)
			resetConn(c)
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve dials the target for client and forwards between them until both
// directions end or the link is closed.
func (p *Proxy) serve(client *net.TCPConn) {
	c, err := p.dialer.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		// The client's connect already succeeded; a reset is the closest a
		// proxy can get to the refusal it would have seen without us.
		if p.ctx.Err() == nil { // not a dial that Close aborted
			p.dialErrors.Add(1)
		}
		resetConn(client)
		return
	}
	l := &link{client: client, server: c.(*net.TCPConn), gone: make(chan struct{})}
	if !p.register(l) {
		return
	}
	defer p.unregister(l)
	defer l.shut(false)
	up := make(chan struct{})
	p.wg.Go(func() {
		defer close(up)
		p.pump(l, Upstream)
	})
	p.pump(l, Downstream)
	<-up
}

// register adds l to the open links, unless the Proxy is closed or the mode
// refuses new connections, in which case it closes l and returns false. It
// runs under p.mu, as setMode does, so a mode change cannot slip between the
// check and the registration.
func (p *Proxy) register(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		l.shut(false)
		return false
	}
	switch p.mode.Load().kind {
	case kindDrop:
		p.drops.Add(1)
		l.shut(false)
		return false
	case kindReset:
		p.resets.Add(1)
		l.shut(true)
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) unregister(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pump copies one direction of l, one chunk at a time, judging each chunk by
// the mode. It returns when its source ends or fails or the link is closed;
// on a failure it closes the whole link so the other direction returns too.
func (p *Proxy) pump(l *link, dir Direction) {
	src, dst := l.client, l.server
	if dir == Downstream {
		src, dst = l.server, l.client
	}
	buf := make([]byte, chunkSize)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			switch p.judge(l, dir, time.Now(), n, false) {
			case gone:
				return
			case discard:
				p.discarded[dir-1].Add(uint64(n))
				if p.hooks.discarded != nil {
					p.hooks.discarded(dir, n)
				}
			case forward:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					l.shut(isReset(werr))
					return
				}
				p.forwarded[dir-1].Add(uint64(n))
			}
		}
		if rerr == nil {
			continue
		}
		if errors.Is(rerr, io.EOF) {
			// Half-close: pass the FIN on when the mode lets this direction
			// flow, and leave the other direction running. A CloseWrite
			// error means dst is gone, which the other pump will see.
			if p.judge(l, dir, time.Now(), 0, true) == forward {
				_ = dst.CloseWrite()
			}
			return
		}
		l.shut(isReset(rerr))
		return
	}
}

// link is one proxied connection: the accepted client side and the dialed
// target side.
type link struct {
	client, server *net.TCPConn
	once           sync.Once
	gone           chan struct{} // closed once both sides are closed
}

// shut closes both sides, with RST if rst, and reports whether this call did
// it; later calls do nothing, so the first reason to close wins.
func (l *link) shut(rst bool) (first bool) {
	l.once.Do(func() {
		first = true
		if rst {
			resetConn(l.client)
			resetConn(l.server)
		} else {
			_ = l.client.Close()
			_ = l.server.Close()
		}
		close(l.gone)
	})
	return first
}

// resetConn closes c with SO_LINGER 0, which makes the kernel send RST
// instead of FIN.
func resetConn(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
