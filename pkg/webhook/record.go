package webhook

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Outcome is what became of one attempt, or of a delivery that never got one.
type Outcome string

const (
	Delivered Outcome = "delivered" // 2xx; final
	Retrying  Outcome = "retrying"  // network error, timeout, 408, 429 or 5xx; another attempt after RetryIn
	Failed    Outcome = "failed"    // as Retrying, but it was the last attempt; final
	Rejected  Outcome = "rejected"  // any other status (3xx, 4xx): not retried; final
	Dropped   Outcome = "dropped"   // the queue was full when Notify was called, or Deliver was given an endpoint not configured: never attempted; final
	Abandoned Outcome = "abandoned" // Run stopped before the delivery finished; final (from Deliver: not final, and not recorded)
)

// Delivery records one attempt to deliver one event to one endpoint (or, for
// Dropped and Abandoned, the end of a delivery without a further attempt).
type Delivery struct {
	ID       string // the attempt's Tollgate-Delivery; empty if no request was sent
	EventID  string
	Endpoint string // Endpoint.Name
	Kind     string
	AskID    string
	Attempt  int // 1-based; 0 when dropped before any attempt
	Outcome  Outcome
	Status   int    // HTTP status; 0 without a response
	Err      string // why it did not succeed; empty when delivered
	At       time.Time
	Duration time.Duration // of the HTTP exchange
	RetryIn  time.Duration // when Retrying: the wait before the next attempt
	Final    bool          // no more attempts follow for this event and endpoint
}

// Recorder receives every Delivery. The Notifier calls it from its worker
// goroutines (drops too: Notify only queues them), so it should be quick;
// an error is logged and otherwise ignored.
type Recorder interface {
	Delivered(ctx context.Context, d Delivery) error
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(ctx context.Context, d Delivery) error

// Delivered calls f.
func (f RecorderFunc) Delivered(ctx context.Context, d Delivery) error { return f(ctx, d) }

// MemoryRecorder keeps every Delivery in memory, for tests. The zero value
// is ready to use.
type MemoryRecorder struct {
	mu      sync.Mutex
	all     []Delivery
	changed chan struct{} // closed and replaced on each record
}

// Delivered implements Recorder.
func (m *MemoryRecorder) Delivered(_ context.Context, d Delivery) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.all = append(m.all, d)
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
	return nil
}

// Deliveries returns a copy of what was recorded, in order.
func (m *MemoryRecorder) Deliveries() []Delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.all)
}

// Wait blocks until cond holds for the deliveries recorded so far, or ctx
// ends (returning its error).
func (m *MemoryRecorder) Wait(ctx context.Context, cond func([]Delivery) bool) error {
	for {
		m.mu.Lock()
		if cond(slices.Clone(m.all)) {
			m.mu.Unlock()
			return nil
		}
		if m.changed == nil {
			m.changed = make(chan struct{})
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
