// Package jaegerserver runs a real Jaeger (v2, the binary built from
// tools/jaeger by `make jaeger`) on loopback, and reads the traces it
// stored back through Jaeger's v1 query API. internal/jaegertest starts one
// for a test; the bench program (internal/bench) one to export traces to.
//
// Start writes a minimal config (in-memory storage, an OTLP gRPC receiver,
// the query service; every port free and on 127.0.0.1, Jaeger's own
// tracing and metrics off), starts the binary and waits until the OTLP
// port accepts connections. Point an otlptracegrpc exporter at
// OTLPEndpoint (WithInsecure), flush it, then poll Traces: Jaeger stores
// spans asynchronously, so a flushed span shows up some tens of
// milliseconds later.
//
// The binary is $TOLLGATE_JAEGER, or else bin/jaeger at the repository
// root. This package runs the binary and does not import Jaeger: Jaeger
// cannot share a module with the OpenTelemetry version that Tollgate uses.
//
// It enforces no invariant; it is a tool for tests and the bench.
package jaegerserver
