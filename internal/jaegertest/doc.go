// Package jaegertest runs a real Jaeger (v2, the binary built from
// tools/jaeger by `make jaeger`) on loopback for a test, and reads the
// traces it stored back through Jaeger's v1 query API. The process and the
// query client are internal/jaegerserver's.
//
// Start writes a minimal config (in-memory storage, an OTLP gRPC receiver,
// the query service; every port free and on 127.0.0.1, Jaeger's own
// tracing and metrics off), starts the binary, waits until the OTLP port
// accepts connections and kills the process when the test ends. Point an
// otlptracegrpc exporter at OTLPEndpoint (WithInsecure), flush it, then
// poll with WaitTrace: Jaeger stores spans asynchronously, so a flushed
// span shows up some tens of milliseconds later.
//
// The binary is $TOLLGATE_JAEGER, or else bin/jaeger at the repository
// root. Without it the test skips, except under CI=true, where it fails.
// This package runs the binary and does not import Jaeger: Jaeger cannot
// share a module with the OpenTelemetry version that Tollgate uses.
//
// It enforces no invariant; it is a tool for tests.
package jaegertest
