package faultproxy

import (
	"fmt"
	"time"
)

// Direction names one direction of a proxied connection.
type Direction uint8

const (
	// Upstream is the client-to-target direction.
	Upstream Direction = iota + 1
	// Downstream is the target-to-client direction.
	Downstream
)

// String returns "upstream" or "downstream".
func (d Direction) String() string {
	switch d {
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

type kind uint8

const (
	kindHeal kind = iota
	kindDelay
	kindBlackHole
	kindDrop
	kindReset
	kindOneWay
)

// mode is one fault setting. A mode value is immutable once published; a
// change publishes a new one and closes the old one's changed channel, so
// that a copier waiting under the old mode wakes up and re-judges its chunk.
type mode struct {
	kind    kind
	delay   time.Duration // kindDelay only
	dir     Direction     // kindOneWay only
	changed chan struct{} // closed when this mode is replaced
}

func (m *mode) String() string {
	switch m.kind {
	case kindDelay:
		return "delay " + m.delay.String()
	case kindBlackHole:
		return "blackhole"
	case kindDrop:
		return "drop"
	case kindReset:
		return "reset"
	case kindOneWay:
		return "oneway " + m.dir.String()
	}
	return "heal"
}

// Heal returns the proxy to plain forwarding. Connections that survived the
// previous fault keep working; bytes a BlackHole or OneWay discarded stay
// lost, and a chunk held by Delay is written at once.
func (p *Proxy) Heal() { p.setMode(mode{kind: kindHeal}) }

// Delay holds every chunk, in either direction, for d after it was read
// before writing it. Order within a direction is kept because each direction
// has one copier that holds one chunk at a time; a chunk's hold is therefore
// added to the time the copier spends not reading, so a burst larger than
// one chunk pays d per chunk (a slow link rather than pure latency). A chunk
// held when the delay changes is released at its read time plus the new d.
// Delay with d <= 0 is Heal.
func (p *Proxy) Delay(d time.Duration) {
	if d <= 0 {
		p.Heal()
		return
	}
	p.setMode(mode{kind: kindDelay, delay: d})
}

// BlackHole keeps accepting connections and keeps open ones open, but
// forwards nothing in either direction: what is read is discarded, so
// nothing queues up. New connections are still dialed to the target, which
// therefore sees a connection that carries no bytes. After Heal, the
// connections work again, with the black-holed bytes missing from their
// streams.
func (p *Proxy) BlackHole() { p.setMode(mode{kind: kindBlackHole}) }

// Drop closes every open connection (FIN, both the client side and the
// target side) and, until the mode changes, accepts new connections and
// closes them at once without dialing the target. (As with any TCP close,
// the kernel sends RST instead of FIN if bytes the proxy never read are
// still queued on the socket, e.g. a new client that wrote before the proxy
// accepted it.)
func (p *Proxy) Drop() { p.setMode(mode{kind: kindDrop}) }

// Reset resets every open connection (SO_LINGER 0 then close, which sends
// RST, on both the client side and the target side) and, until the mode
// changes, accepts new connections and resets them at once without dialing
// the target.
func (p *Proxy) Reset() { p.setMode(mode{kind: kindReset}) }

// OneWay partitions one direction: bytes flowing in dir are read and
// discarded, the connection stays open, and the other direction flows. It
// panics if dir is neither Upstream nor Downstream.
func (p *Proxy) OneWay(dir Direction) {
	if dir != Upstream && dir != Downstream {
		panic(fmt.Sprintf("faultproxy: OneWay(%v): direction must be Upstream or Downstream", dir))
	}
	p.setMode(mode{kind: kindOneWay, dir: dir})
}

// Mode returns the current mode's name for logs: "heal", "delay 200ms",
// "blackhole", "drop", "reset", "oneway upstream" or "oneway downstream".
func (p *Proxy) Mode() string { return p.mode.Load().String() }

// setMode publishes m and applies it to open connections. It holds p.mu so
// that it is atomic with respect to link registration: a connection is
// either registered before the change (and closed here if m is Drop or
// Reset) or registers after it (and sees m then).
func (p *Proxy) setMode(m mode) {
	m.changed = make(chan struct{})
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.mode.Swap(&m)
	close(old.changed)
	switch m.kind {
	case kindDrop:
		for l := range p.links {
			if l.shut(false) {
				p.drops.Add(1)
			}
		}
	case kindReset:
		for l := range p.links {
			if l.shut(true) {
				p.resets.Add(1)
			}
		}
	}
}

type verdict uint8

const (
	forward verdict = iota // write the chunk (or pass the end of stream on)
	discard                // throw the chunk away
	gone                   // the link was closed; the copier must return
)

// judge decides what to do with a chunk read at readAt and travelling in
// dir; eof means the chunk is the end of the stream rather than bytes. It
// blocks while the mode says to hold (Delay for bytes and ends of stream;
// BlackHole and OneWay for ends of stream; Drop and Reset until they have
// closed the link) and re-judges whenever the mode changes. It never blocks
// past the link's closing, which Close guarantees.
func (p *Proxy) judge(l *link, dir Direction, readAt time.Time, n int, eof bool) verdict {
	announced := false
	for {
		m := p.mode.Load()
		var timer *time.Timer
		var fire <-chan time.Time // nil unless holding for a Delay
		switch m.kind {
		case kindHeal:
			return forward
		case kindDelay:
			wait := time.Until(readAt.Add(m.delay))
			if wait <= 0 {
				return forward
			}
			timer = time.NewTimer(wait)
			fire = timer.C
			if !announced && p.hooks.held != nil {
				p.hooks.held(dir, n)
			}
			announced = true
		case kindBlackHole:
			if !eof {
				return discard
			}
		case kindOneWay:
			if m.dir != dir {
				return forward
			}
			if !eof {
				return discard
			}
		case kindDrop, kindReset:
			// setMode closes every registered link after publishing the
			// mode, so l.gone is about to close; forwarding meanwhile would
			// let bytes slip through a dropped connection.
		}
		select {
		case <-fire:
		case <-m.changed:
		case <-l.gone:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-l.gone:
			return gone
		default:
		}
	}
}
