package telemetry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures tracing for one process.
type Config struct {
	// Endpoint is the OTLP gRPC collector, host:port (Jaeger's OTLP
	// receiver, a collector). Empty: tracing is off and every span is a
	// no-op.
	Endpoint string
	// Insecure sends without TLS; a loopback endpoint is always plain.
	Insecure bool
	// Sample is the share of runs traced, 0 < Sample ≤ 1 (0 means 1). The
	// decision is a function of the trace id, so the control plane and
	// the executors agree on it without talking (see Sampled).
	Sample float64
	// Service is service.name; Instance is service.instance.id (default
	// host:pid).
	Service, Instance string
	// QueueSize bounds spans waiting for export (default 65,536): a 100-way
	// fan ending at once is a burst of a few hundred spans, and a queue
	// that overflows drops spans silently (Dropped counts them).
	QueueSize int
	// BatchTimeout is the longest a span waits before export (default 2s).
	BatchTimeout time.Duration
	Log          *slog.Logger
	// Exporter, if set, receives the spans instead of an OTLP exporter
	// for Endpoint (tests read spans back from an in-memory one).
	Exporter sdktrace.SpanExporter
}

// Tracing is a process's tracer provider. The zero value is off.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
	sample   float64
}

// Off is tracing that records nothing.
func Off() *Tracing { return &Tracing{provider: noop.NewTracerProvider()} }

// New starts tracing as cfg says. The exporter connects lazily: a
// collector that is down loses spans, never blocks the caller. Call
// Shutdown to flush.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	if cfg.Endpoint == "" && cfg.Exporter == nil {
		return Off(), nil
	}
	if cfg.Sample <= 0 || cfg.Sample > 1 {
		cfg.Sample = 1
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1 << 16
	}
	if cfg.BatchTimeout <= 0 {
		cfg.BatchTimeout = 2 * time.Second
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	exp := cfg.Exporter
	if exp == nil {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint)}
		if cfg.Insecure || loopback(cfg.Endpoint) {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		var err error
		if exp, err = otlptracegrpc.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("otlp exporter for %s: %w", cfg.Endpoint, err)
		}
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.Service),
		attribute.String("service.version", Version()),
		attribute.String("service.instance.id", cfg.Instance),
	))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(chosenIDs{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Sample))),
		sdktrace.WithBatcher(exp,
			sdktrace.WithMaxQueueSize(cfg.QueueSize),
			sdktrace.WithMaxExportBatchSize(min(cfg.QueueSize, 4096)),
			sdktrace.WithBatchTimeout(cfg.BatchTimeout)),
	)
	if cfg.Log != nil {
		cfg.Log.Info("tracing", "otlp_endpoint", cfg.Endpoint, "sample", cfg.Sample, "service", cfg.Service)
	}
	return &Tracing{provider: tp, sdk: tp, sample: cfg.Sample}, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Tracer returns a named tracer.
func (t *Tracing) Tracer(name string) trace.Tracer {
	if t == nil || t.provider == nil {
		return noop.NewTracerProvider().Tracer(name)
	}
	return t.provider.Tracer(name)
}

// Provider is the tracer provider, for instrumentation that takes one.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil || t.provider == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Sampled reports whether the trace with this id is recorded: the same
// rule as the SDK's TraceIDRatioBased sampler, so a control plane can set
// a lease's sampled flag that executors (ParentBased) follow. Off: never.
func (t *Tracing) Sampled(id trace.TraceID) bool {
	if !t.Enabled() {
		return false
	}
	if t.sample >= 1 {
		return true
	}
	bound := uint64(t.sample * (1 << 63))
	return binary.BigEndian.Uint64(id[8:16])>>1 < bound
}

// Flush exports what is queued; it blocks until then or until ctx ends.
func (t *Tracing) Flush(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}

// Shutdown flushes what is queued and stops the exporter; it blocks until
// then or until ctx ends.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// Version is the binary's module version ("(devel)" for a local build).
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func loopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RunTraceID is the trace id of a run: every span of the run, on every
// replica and executor, is in it.
func RunTraceID(runID string) trace.TraceID {
	h := sha256.Sum256([]byte("tollgate-trace\x00" + runID))
	var id trace.TraceID
	copy(id[:], h[:16])
	return id
}

// SpanID derives a span id from a name that is unique within its trace
// (a lease id, "run", "fan/PHASE/GROUP"…). The derivation for lease ids
// is the one the lease's traceparent carries, so the step span and the
// executor's parent agree.
func SpanID(name string) trace.SpanID {
	h := sha256.Sum256([]byte("tollgate-span\x00" + name))
	var id trace.SpanID
	copy(id[:], h[:8])
	return id
}

// Traceparent renders a W3C trace context header value.
func Traceparent(tid trace.TraceID, sid trace.SpanID, sampled bool) string {
	flags := "00"
	if sampled {
		flags = "01"
	}
	return "00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-" + flags
}

// ParseTraceparent reads a W3C traceparent value into a remote span
// context; an invalid one is an error (the caller then starts a trace of
// its own, or none).
func ParseTraceparent(v string) (trace.SpanContext, error) {
	if len(v) != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || v[:2] != "00" {
		return trace.SpanContext{}, errors.New("traceparent: not version 00 of the W3C format")
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var fl [1]byte
	if _, err := hex.Decode(tid[:], []byte(v[3:35])); err != nil {
		return trace.SpanContext{}, fmt.Errorf("traceparent trace id: %w", err)
	}
	if _, err := hex.Decode(sid[:], []byte(v[36:52])); err != nil {
		return trace.SpanContext{}, fmt.Errorf("traceparent span id: %w", err)
	}
	if _, err := hex.Decode(fl[:], []byte(v[53:55])); err != nil {
		return trace.SpanContext{}, fmt.Errorf("traceparent flags: %w", err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(fl[0]), Remote: true})
	if !sc.IsValid() {
		return trace.SpanContext{}, errors.New("traceparent: zero trace or span id")
	}
	return sc, nil
}

// chosenIDs is the SDK's id generator: it uses the ids WithIDs put in
// the context, and random ones otherwise.
type chosenIDs struct{}

type idsKey struct{}

type chosen struct {
	trace trace.TraceID
	span  trace.SpanID
}

// WithIDs makes the next span started with ctx take these ids (the trace
// id only matters for a root span; a child keeps its parent's).
func WithIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, chosen{trace: tid, span: sid})
}

func (chosenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if c, ok := ctx.Value(idsKey{}).(chosen); ok && c.trace.IsValid() && c.span.IsValid() {
		return c.trace, c.span
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	return tid, sid
}

func (chosenIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if c, ok := ctx.Value(idsKey{}).(chosen); ok && c.span.IsValid() {
		return c.span
	}
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	return sid
}
