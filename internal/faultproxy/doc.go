// Package faultproxy is a TCP fault-injection proxy for test harnesses. A
// chaos (nemesis) test puts one Proxy on each link it wants to break: between
// a control plane and redis-server, between executors and a control plane,
// between clients and a control plane. It then switches the proxy between
// faults while the system runs, and heals it.
//
// Contract:
//
//   - Loopback only. New listens on 127.0.0.1 and refuses a target whose host
//     is not "localhost" or a loopback address (a name is resolved once, and
//     every address it resolves to must be loopback; the proxy then dials
//     the first one). The proxy is a test tool, and this keeps it from being
//     pointed at a real network by mistake.
//   - One fault at a time. Heal, Delay, BlackHole, Drop, Reset and OneWay each
//     replace the current mode, and the new mode applies at once to open
//     connections as well as to new ones. The mode is consulted per chunk (one
//     read of up to 32 KiB): a chunk that is already being written is not
//     affected by a later change, while a chunk being held by Delay, or an end
//     of stream being held by BlackHole or OneWay, is re-judged as soon as the
//     mode changes.
//   - Bounded memory. Each direction of a connection holds at most one chunk.
//     Delay stops reading while it holds a chunk, so TCP flow control pushes
//     back on the sender. BlackHole and OneWay keep reading and discard what
//     they read.
//   - Lost means lost. Bytes discarded by BlackHole or OneWay are never
//     delivered, also not after Heal: a connection that was open across a
//     black hole keeps working after Heal, but its byte stream has a gap,
//     which is what a real black hole does to an application protocol. (An
//     end of stream is not lost: a FIN read during a black hole is held and
//     passed on once the direction flows again, as TCP would retransmit it.)
//   - Half-close is forwarded: when one side shuts its write half, the proxy
//     shuts the write half towards the other side once the mode lets that
//     direction flow, and the opposite direction keeps flowing. A reset read
//     from one side is passed on as a reset to the other.
//   - No leaks. Close stops the listener, closes every connection and waits
//     for every goroutine the Proxy started, including any held in a Delay.
//
// The package has no package-level mutable state; every Proxy is independent.
package faultproxy
