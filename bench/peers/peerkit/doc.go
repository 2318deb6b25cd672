// Package peerkit is what the peer benchmark harnesses (bench/peers/temporal,
// bench/peers/river) share: the PostgreSQL server each creates its fresh
// databases on and drops them from, the progress lines and the tally of
// what the measured system logs, the percentiles and the sustained phase's
// loop, the machine's figures for the report, writing the report, and the
// harness's main. Its package pgtest is the peers' tests' way to the
// machine's PostgreSQL.
//
// It is a module of its own, like each peer, and only the peers require it
// (through a replace to ../peerkit): the main module never imports it, and
// reads the peers' JSON, whose shape each peer keeps in its own Report and
// Result. What a peer measures, its flags and its Markdown stay in the
// peer.
package peerkit
