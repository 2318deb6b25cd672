// Package metrics counts what the control plane does (DESIGN.md §9) with
// the OpenTelemetry metric SDK and serves it in the Prometheus text format
// through the OpenTelemetry Prometheus exporter, on a registry of its own.
//
// Counters and histograms are fed by [Metrics.Committed], a
// runner.Observer: they count the transitions this replica committed, so
// they add up across replicas (sum them). The gauges of runs and asks by state
// are read from the store at scrape time: every replica reports the
// store's whole figure, right after a restart too (take one replica's, or
// max, never the sum).
//
// It enforces no invariant; it shows I10's figure (tollgate_fan_parallelism
// from engine.Machine.FansDone, the one computation traces and the API
// report) and the policy's health (policy.go).
package metrics
