package webhook

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Notifier defaults.
const (
	DefaultQueueSize      = 1024
	DefaultConcurrency    = 4
	DefaultMaxAttempts    = 6
	DefaultAttemptTimeout = 10 * time.Second
	DefaultBaseBackoff    = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultMaxRetryAfter  = 5 * time.Minute

	// dropBacklog is how many Dropped records (beyond QueueSize) wait for
	// Run to hand them to the Recorder; drops past it are counted in Stats
	// and logged, not recorded one by one.
	dropBacklog = 4096

	// MaxEventBytes bounds an event's JSON, so that a delivery fits the
	// Verifier's DefaultMaxBody.
	MaxEventBytes = DefaultMaxBody - 1024
)

var (
	// ErrQueueFull is returned by Notify when a delivery was dropped (and
	// recorded as Dropped) because QueueSize deliveries were pending.
	ErrQueueFull = errors.New("webhook: queue full, delivery dropped")
	// ErrRunning is returned by Run when another Run is active.
	ErrRunning = errors.New("webhook: Run is already running")
)

// Config configures a Notifier. Zero fields take the defaults.
type Config struct {
	// Client sends the requests; nil is a client of the Notifier's own,
	// whose idle connections Run closes when it returns. Redirects are
	// never followed, whatever the client says: a 3xx is Rejected.
	Client *http.Client
	// Now stamps signatures and records; default time.Now. Waiting
	// (backoff, timeouts) uses the real clock.
	Now func() time.Time
	// Log gets a line per attempt that did not succeed (debug for those
	// that did); it never gets a URL, secret or body. Default: discard.
	Log *slog.Logger
	// Recorder gets every Delivery; nil records nothing.
	Recorder Recorder

	QueueSize      int           // most deliveries pending (queued, waiting to retry or in flight); default 1024
	Concurrency    int           // requests in flight at once; default 4
	MaxAttempts    int           // per event and endpoint; default 6
	AttemptTimeout time.Duration // one request, response body included; default 10s
	BaseBackoff    time.Duration // wait after the first failed attempt, doubled after each; default 1s
	MaxBackoff     time.Duration // cap on that wait; default 1 min
	MaxRetryAfter  time.Duration // cap on a Retry-After honoured; default 5 min
}

// Notifier delivers events to the endpoints that want them. Notify queues;
// Run, on a goroutine the caller owns, sends. Safe for concurrent use.
//
// What is pending lives in memory: deliveries still queued or waiting to
// retry when Run returns are recorded as Abandoned, and a process that dies
// loses them unrecorded.
type Notifier struct {
	cfg       Config
	client    *http.Client
	ownClient bool
	log       *slog.Logger
	endpoints atomic.Pointer[[]Endpoint]

	queue   chan *job
	pending atomic.Int64 // jobs queued, waiting to retry or in a worker (≤ QueueSize), and Deliver calls under way
	// sending bounds the requests of Deliver calls in flight at once
	// (Concurrency); Run's workers are bounded by their number.
	sending chan struct{}
	running atomic.Bool

	mu        sync.Mutex
	drops     []dropped // dropped by Notify, recorded by Run; at most max(QueueSize, dropBacklog)
	lostDrops uint64    // dropped beyond what drops holds: counted and logged only
	dropped   chan struct{}

	attempts, delivered, rejected, failed, droppedN, abandoned atomic.Uint64
}

// job is one event on its way to one endpoint.
type job struct {
	ep      Endpoint
	ev      Event  // ID, Kind and AskID only, for records
	raw     []byte // the event's JSON, fixed when Notify was called
	attempt int    // attempts made
	due     time.Time
}

// New returns a Notifier for the given endpoints (see SetEndpoints).
func New(cfg Config, endpoints []Endpoint) (*Notifier, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = DefaultBaseBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.BaseBackoff)
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	n := &Notifier{
		cfg:     cfg,
		log:     cfg.Log,
		queue:   make(chan *job, cfg.QueueSize),
		sending: make(chan struct{}, cfg.Concurrency),
		dropped: make(chan struct{}, 1),
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	var c http.Client
	if cfg.Client != nil {
		c = *cfg.Client
	} else {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
		n.ownClient = true
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	n.client = &c
	if err := n.SetEndpoints(endpoints); err != nil {
		return nil, err
	}
	return n, nil
}

// SetEndpoints replaces the endpoints for events notified from now on;
// deliveries already pending keep the endpoint they were queued for.
// Names must be unique. The endpoints' slices must not be modified later.
func (n *Notifier) SetEndpoints(endpoints []Endpoint) error {
	names := make(map[string]bool, len(endpoints))
	for _, e := range endpoints {
		if err := e.validate(); err != nil {
			return err
		}
		if names[e.Name] {
			return fmt.Errorf("webhook: two endpoints named %s", e.Name)
		}
		names[e.Name] = true
	}
	eps := slices.Clone(endpoints)
	n.endpoints.Store(&eps)
	return nil
}

// Notify queues ev for every endpoint that wants it (Endpoint.Wants) and
// returns at once: it never waits for the network, for Run or for the
// Recorder. The event is encoded now, so the caller may reuse its Payload.
// Notify sets ev.ID and ev.OccurredAt when empty.
//
// When QueueSize deliveries are already pending, the delivery to that
// endpoint is dropped: recorded as Dropped (by Run, off the caller's
// goroutine; while more than max(QueueSize, 4096) drops await recording,
// further ones are only counted in Stats and logged) and reported as
// ErrQueueFull. Other errors mean ev is
// invalid and nothing was queued. Events notified while no Run is active
// wait in the queue for one.
func (n *Notifier) Notify(ctx context.Context, ev Event) error {
	ev, raw, eps, err := n.prepare(ev)
	if err != nil {
		return err
	}
	short := Event{ID: ev.ID, Kind: ev.Kind, AskID: ev.AskID, Journal: ev.Journal}
	targets, drops := 0, 0
	for _, e := range eps {
		targets++
		j := &job{ep: e, ev: short, raw: raw}
		if n.reserve() {
			select {
			case n.queue <- j: // always has room: it holds at most pending-1 jobs
				continue
			default:
				n.pending.Add(-1)
			}
		}
		drops++
		n.drop(dropped{Delivery{
			EventID: ev.ID, Endpoint: e.Name, Kind: ev.Kind, AskID: ev.AskID,
			Outcome: Dropped, Err: fmt.Sprintf("queue full: %d deliveries pending", n.cfg.QueueSize),
			At: n.cfg.Now(), Final: true,
		}, ev.Journal})
	}
	if drops > 0 {
		n.log.WarnContext(ctx, "webhook deliveries dropped: queue full", "kind", ev.Kind, "ask", ev.AskID, "dropped", drops, "endpoints", targets)
		return fmt.Errorf("%w: %s %s to %d of %d endpoints", ErrQueueFull, ev.Kind, ev.AskID, drops, targets)
	}
	return nil
}

// prepare checks ev, fills in its ID and OccurredAt when empty, encodes
// it and returns the endpoints that want it.
func (n *Notifier) prepare(ev Event) (Event, []byte, []Endpoint, error) {
	if !KnownKind(ev.Kind) {
		return ev, nil, nil, fmt.Errorf("webhook: unknown event kind %q", ev.Kind)
	}
	if ev.AskID == "" {
		return ev, nil, nil, errors.New("webhook: event has no ask id")
	}
	if ev.ID == "" {
		ev.ID = newID("evt_")
	}
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = n.cfg.Now()
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return ev, nil, nil, fmt.Errorf("webhook: %s %s: encoding the event: %w", ev.Kind, ev.AskID, err)
	}
	if len(raw) > MaxEventBytes {
		return ev, nil, nil, fmt.Errorf("webhook: %s %s: event is %d bytes, more than %d", ev.Kind, ev.AskID, len(raw), MaxEventBytes)
	}
	var eps []Endpoint
	for _, e := range *n.endpoints.Load() {
		if e.Wants(ev) {
			eps = append(eps, e)
		}
	}
	return ev, raw, eps, nil
}

func (n *Notifier) reserve() bool {
	for {
		p := n.pending.Load()
		if p >= int64(n.cfg.QueueSize) {
			return false
		}
		if n.pending.CompareAndSwap(p, p+1) {
			return true
		}
	}
}

func (n *Notifier) drop(d dropped) {
	n.droppedN.Add(1)
	n.mu.Lock()
	if len(n.drops) < max(n.cfg.QueueSize, dropBacklog) {
		n.drops = append(n.drops, d)
	} else {
		n.lostDrops++
	}
	n.mu.Unlock()
	select {
	case n.dropped <- struct{}{}:
	default:
	}
}

// Run sends what Notify queues until ctx ends, with up to Concurrency
// requests in flight; failed attempts wait for their retry without holding
// a worker. When ctx ends Run aborts the requests in flight, records every
// delivery still pending as Abandoned, waits for its goroutines and
// returns nil. Only one Run may be active at a time (ErrRunning).
func (n *Notifier) Run(ctx context.Context) error {
	if !n.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer n.running.Store(false)

	retries := make(chan *job)
	var wg sync.WaitGroup
	for range n.cfg.Concurrency {
		wg.Go(func() { n.work(ctx, retries) })
	}

	var waiting jobHeap
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	arm := func() {
		if len(waiting) > 0 {
			timer.Reset(time.Until(waiting[0].due))
		} else {
			timer.Stop()
		}
	}
	n.flushDrops(ctx)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case j := <-retries:
			heap.Push(&waiting, j)
			arm()
		case <-timer.C:
			now := time.Now()
		due:
			for len(waiting) > 0 && !waiting[0].due.After(now) {
				select {
				case n.queue <- waiting[0]: // has room, as in Notify
					heap.Pop(&waiting)
				default: // cannot happen; try again shortly rather than spin
					timer.Reset(10 * time.Millisecond)
					break due
				}
			}
			if len(waiting) == 0 || waiting[0].due.After(now) {
				arm()
			}
		case <-n.dropped:
			n.flushDrops(ctx)
		}
	}
	wg.Wait()

	for _, j := range waiting {
		n.finish(ctx, j, Delivery{Outcome: Abandoned, Err: "notifier stopped while waiting to retry"})
	}
drain:
	for {
		select {
		case j := <-n.queue:
			n.finish(ctx, j, Delivery{Outcome: Abandoned, Err: "notifier stopped before the delivery was attempted"})
		default:
			break drain
		}
	}
	n.flushDrops(ctx)
	if n.ownClient {
		n.client.CloseIdleConnections()
	}
	return nil
}

func (n *Notifier) work(ctx context.Context, retries chan<- *job) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-n.queue:
			n.attempt(ctx, j, retries)
		}
	}
}

// attempt makes one attempt of j and records it; a retry goes back to Run.
func (n *Notifier) attempt(ctx context.Context, j *job, retries chan<- *job) {
	if ctx.Err() != nil {
		n.finish(ctx, j, Delivery{Outcome: Abandoned, Err: "notifier stopped before the delivery was attempted"})
		return
	}
	j.attempt++
	n.attempts.Add(1)
	d, retryAfter, hasRetryAfter := n.send(ctx, j)
	if d.Outcome != Retrying {
		n.finish(ctx, j, d)
		return
	}
	if j.attempt >= n.cfg.MaxAttempts {
		d.Outcome = Failed
		d.Err += fmt.Sprintf(" (attempt %d of %d)", j.attempt, n.cfg.MaxAttempts)
		n.finish(ctx, j, d)
		return
	}
	d.RetryIn = n.retryDelay(j.attempt, retryAfter, hasRetryAfter)
	n.record(ctx, j, d)
	j.due = time.Now().Add(d.RetryIn)
	select {
	case retries <- j:
	case <-ctx.Done():
		n.finish(ctx, j, Delivery{Outcome: Abandoned, Err: "notifier stopped while waiting to retry"})
	}
}

// send makes one HTTP request for j and classifies it: Delivered, Rejected,
// Abandoned (ctx ended) or Retrying.
func (n *Notifier) send(ctx context.Context, j *job) (d Delivery, retryAfter time.Duration, hasRetryAfter bool) {
	d = Delivery{ID: newID("dlv_"), Attempt: j.attempt, At: n.cfg.Now()}
	body, err := json.Marshal(wireEnvelope{DeliveryID: d.ID, Attempt: j.attempt, Event: j.raw})
	if err != nil { // cannot happen: raw came from json.Marshal
		d.Outcome, d.Err = Rejected, "encoding the envelope: "+err.Error()
		return d, 0, false
	}
	actx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, j.ep.URL, bytes.NewReader(body))
	if err != nil {
		d.Outcome, d.Err = Rejected, "building the request: "+cleanErr(err)
		return d, 0, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Tollgate-Webhook/1")
	req.Header.Set(HeaderSignature, SignatureHeader(d.At, body, j.ep.secrets()...))
	req.Header.Set(HeaderDelivery, d.ID)
	req.Header.Set(HeaderEvent, j.ev.Kind)

	start := time.Now()
	resp, err := n.client.Do(req)
	var snippet []byte
	if err == nil {
		snippet, _ = io.ReadAll(io.LimitReader(resp.Body, 512))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		resp.Body.Close()
	}
	d.Duration = time.Since(start)
	switch {
	case err != nil && ctx.Err() != nil:
		d.Outcome, d.Err = Abandoned, "notifier stopped during the request"
	case err != nil:
		d.Outcome = Retrying
		if actx.Err() != nil {
			d.Err = fmt.Sprintf("no response within %s", n.cfg.AttemptTimeout)
		} else {
			d.Err = cleanErr(err)
		}
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		d.Outcome, d.Status = Delivered, resp.StatusCode
	default:
		d.Status = resp.StatusCode
		d.Err = "HTTP " + strconv.Itoa(resp.StatusCode)
		if s := printable(snippet, 200); s != "" {
			d.Err += ": " + s
		}
		d.Outcome = Rejected
		if retryableStatus(resp.StatusCode) {
			d.Outcome = Retrying
			retryAfter, hasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), n.cfg.Now())
		}
	}
	return d, retryAfter, hasRetryAfter
}

// wireEnvelope is Envelope with the event already encoded.
type wireEnvelope struct {
	DeliveryID string          `json:"delivery_id"`
	Attempt    int             `json:"attempt"`
	Event      json.RawMessage `json:"event"`
}

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// retryDelay is the wait after attempt (1-based) failed: BaseBackoff·2^(attempt-1)
// capped at MaxBackoff, with equal jitter (half fixed, half random), or a
// longer Retry-After capped at MaxRetryAfter.
func (n *Notifier) retryDelay(attempt int, retryAfter time.Duration, hasRetryAfter bool) time.Duration {
	d := n.cfg.BaseBackoff
	for i := 1; i < attempt && d < n.cfg.MaxBackoff; i++ {
		if d > math.MaxInt64/2 {
			d = n.cfg.MaxBackoff
			break
		}
		d *= 2
	}
	d = min(d, n.cfg.MaxBackoff)
	half := d / 2
	d = half + rand.N(d-half+1)
	if hasRetryAfter {
		if ra := min(retryAfter, n.cfg.MaxRetryAfter); ra > d {
			d = ra
		}
	}
	return d
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// finish records j's final Delivery d and lets go of its place in the queue.
func (n *Notifier) finish(ctx context.Context, j *job, d Delivery) {
	d = n.settle(j, d)
	n.pending.Add(-1) // before the record: whoever sees the record sees the counts
	n.record(ctx, j, d)
}

// settle makes d j's final Delivery and counts it.
func (n *Notifier) settle(j *job, d Delivery) Delivery {
	d.Final = true
	if d.Attempt == 0 {
		d.Attempt = j.attempt
	}
	if d.At.IsZero() {
		d.At = n.cfg.Now()
	}
	switch d.Outcome {
	case Delivered:
		n.delivered.Add(1)
	case Rejected:
		n.rejected.Add(1)
	case Failed:
		n.failed.Add(1)
	case Dropped:
		n.droppedN.Add(1)
	case Abandoned:
		n.abandoned.Add(1)
	}
	return d
}

func (n *Notifier) record(ctx context.Context, j *job, d Delivery) {
	d.EventID, d.Endpoint, d.Kind, d.AskID = j.ev.ID, j.ep.Name, j.ev.Kind, j.ev.AskID
	n.write(ctx, j.ev.Journal, d)
}

// dropped is a delivery Notify dropped, with the journal of its event.
type dropped struct {
	d       Delivery
	journal Recorder
}

// write logs a delivery and hands it to journal, else to the Recorder.
func (n *Notifier) write(ctx context.Context, journal Recorder, d Delivery) {
	attrs := []any{"endpoint", d.Endpoint, "kind", d.Kind, "ask", d.AskID, "event", d.EventID,
		"delivery", d.ID, "attempt", d.Attempt, "outcome", string(d.Outcome)}
	if d.Status != 0 {
		attrs = append(attrs, "status", d.Status)
	}
	if d.Err != "" {
		attrs = append(attrs, "err", d.Err)
	}
	if d.RetryIn > 0 {
		attrs = append(attrs, "retry_in", d.RetryIn)
	}
	if d.Outcome == Delivered {
		n.log.DebugContext(ctx, "webhook delivered", attrs...)
	} else {
		n.log.WarnContext(ctx, "webhook not delivered", attrs...)
	}
	if journal == nil {
		journal = n.cfg.Recorder
	}
	if journal == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.AttemptTimeout)
	defer cancel()
	if err := journal.Delivered(rctx, d); err != nil {
		n.log.ErrorContext(ctx, "webhook delivery not recorded", "endpoint", d.Endpoint, "delivery", d.ID, "event", d.EventID, "err", err)
	}
}

func (n *Notifier) flushDrops(ctx context.Context) {
	n.mu.Lock()
	drops, lost := n.drops, n.lostDrops
	n.drops, n.lostDrops = nil, 0
	n.mu.Unlock()
	for _, d := range drops {
		n.write(ctx, d.journal, d.d)
	}
	if lost > 0 {
		n.log.ErrorContext(ctx, "webhook deliveries dropped and not recorded one by one", "count", lost)
	}
}

// Stats counts what a Notifier did since New.
type Stats struct {
	Pending   int    // queued, waiting to retry or in flight
	Attempts  uint64 // requests started
	Delivered uint64
	Rejected  uint64
	Failed    uint64
	Dropped   uint64
	Abandoned uint64
}

// Stats returns the current counts.
func (n *Notifier) Stats() Stats {
	return Stats{
		Pending:   int(n.pending.Load()),
		Attempts:  n.attempts.Load(),
		Delivered: n.delivered.Load(),
		Rejected:  n.rejected.Load(),
		Failed:    n.failed.Load(),
		Dropped:   n.droppedN.Load(),
		Abandoned: n.abandoned.Load(),
	}
}

// cleanErr drops the URL from a client error: a webhook URL may carry a
// token in its path or query.
func cleanErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

func printable(b []byte, limit int) string {
	var s strings.Builder
	for _, r := range string(b) {
		if s.Len() >= limit {
			s.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			r = ' '
		}
		s.WriteRune(r)
	}
	return strings.Join(strings.Fields(s.String()), " ")
}

type jobHeap []*job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(*job)) }
func (h *jobHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
