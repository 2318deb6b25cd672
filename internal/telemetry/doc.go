// Package telemetry sets up OpenTelemetry tracing for Tollgate's
// processes: an OTLP gRPC exporter behind a batch processor sized for
// bursts, the resource (service.name, service.version,
// service.instance.id), a sampler, and span ids that callers may choose.
//
// Tollgate names its spans' ids itself (see IDs): a run's trace id is
// derived from the run id and each lease's span id from the lease id, so
// spans are built from the run's durable record when each part ends —
// on any replica, after a restart — instead of being held open across a
// park that may last days, and an executor joins a step's span through
// the lease's traceparent alone.
//
// It enforces no invariant; its derived ids let internal/runtrace draw
// traces from the record (I8, I10 are kept there).
package telemetry
