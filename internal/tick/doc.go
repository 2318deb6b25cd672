// Package tick runs a pass at an interval until its context ends: the
// shape of every background pass a replica's owner runs (the sweep, the
// resettle and takeover passes, the heartbeat). It enforces no invariant
// of its own.
package tick
