package jaegerserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tollgate-dev/tollgate/internal/reporoot"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// EnvBinary names the environment variable that overrides the binary's path.
const EnvBinary = "TOLLGATE_JAEGER"

// readyTimeout bounds how long Start waits for the OTLP port.
const readyTimeout = 60 * time.Second

// ErrNoBinary is wrapped by Binary's error when there is no Jaeger binary.
var ErrNoBinary = errors.New("no Jaeger binary")

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLPEndpoint is the OTLP/gRPC receiver as host:port, for
	// otlptracegrpc.WithEndpoint (plain text: use WithInsecure).
	OTLPEndpoint string
	// QueryURL is the query service's base URL (http://127.0.0.1:PORT),
	// which serves the UI and the /api/... query APIs.
	QueryURL string

	cfgPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	log     *lockedBuffer
	tr      *http.Transport
	http    *http.Client
	stopped sync.Once
}

// Start starts bin (see Binary) with its config in dir and waits until its
// OTLP receiver accepts connections. Stop it when done: shut down the
// TracerProvider that exports to it before that.
func Start(bin, dir string) (*Jaeger, error) {
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		var j *Jaeger
		j, err = launch(bin, dir)
		if err == nil {
			return j, nil
		}
		// A free port picked for Jaeger can be taken by someone else
		// before Jaeger binds it: pick others.
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, err
}

// Binary returns the path of the Jaeger binary: $TOLLGATE_JAEGER, or else
// bin/jaeger at the root of the repository that holds the working
// directory. Its error wraps ErrNoBinary when there is none there.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("jaegerserver: $%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	root, err := reporoot.Find()
	if err != nil {
		return "", fmt.Errorf("jaegerserver: %w", err)
	}
	p := filepath.Join(root, "bin", "jaeger")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("jaegerserver: %w at %s (build it with `make jaeger` at the repository root, ~5 min cold, or set $%s): %w", ErrNoBinary, p, EnvBinary, err)
	}
	return p, nil
}

// Config returns the YAML config that Start gives Jaeger: the in-memory
// store, an OTLP/gRPC receiver and the query service (HTTP and gRPC), all
// on 127.0.0.1 at the given ports; no batch processor (spans are stored as
// they arrive); Jaeger's own tracing off and its metrics off (no :8888).
func Config(otlpPort, queryHTTPPort, queryGRPCPort int) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info

extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, queryHTTPPort, queryGRPCPort, otlpPort)
}

var errPortTaken = errors.New("jaegerserver: a port was taken before Jaeger bound it")

func launch(bin, dir string) (*Jaeger, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, []byte(Config(ports[0], ports[1], ports[2])), 0o644); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	j := &Jaeger{
		OTLPEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		QueryURL:     fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		cfgPath:      cfg,
		done:         make(chan struct{}),
		log:          &lockedBuffer{},
		tr:           tr,
		http:         &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}
	cmd := exec.Command(bin, "--config=file:"+cfg)
	cmd.Dir = dir
	cmd.SysProcAttr = procAttr()
	cmd.Stdout, cmd.Stderr = j.log, j.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jaegerserver: starting %s: %w", bin, err)
	}
	j.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(j.done)
	}()
	if err := j.waitReady(); err != nil {
		j.Stop()
		return nil, err
	}
	return j, nil
}

// waitReady waits until the OTLP port accepts connections. The collector
// starts its extensions (the query service) before its receivers, so an
// open OTLP port means Jaeger is up; an open query port does not.
func (j *Jaeger) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		c, err := net.DialTimeout("tcp", j.OTLPEndpoint, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-j.done:
			log := j.Log()
			err := fmt.Errorf("jaegerserver: jaeger exited before its OTLP port opened (%v); its output:\n%s", j.cmd.ProcessState, log)
			if strings.Contains(log, "address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("jaegerserver: the OTLP port %s did not open within %v; jaeger's output:\n%s", j.OTLPEndpoint, readyTimeout, j.Log())
		}
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n { // hold every listener until all are picked: n distinct ports
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Stop kills Jaeger's process group and waits for the process to be gone.
// Stopping a stopped Jaeger does nothing.
func (j *Jaeger) Stop() {
	j.stopped.Do(func() {
		killGroup(j.cmd.Process)
		<-j.done
		j.tr.CloseIdleConnections()
	})
}

// Pid is the Jaeger process's id.
func (j *Jaeger) Pid() int { return j.cmd.Process.Pid }

// ConfigPath is the config file Jaeger was started with.
func (j *Jaeger) ConfigPath() string { return j.cfgPath }

// Log returns what Jaeger has printed so far.
func (j *Jaeger) Log() string { return j.log.String() }

// Exited reports whether the process has exited.
func (j *Jaeger) Exited() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// Traces returns the traces Jaeger holds that have a span of service (up
// to 1,000, from the last two days), through the v1 API
// /api/traces?service=S, each with its spans ordered by start time.
// A trace may still lack spans that were sent but not yet stored.
func (j *Jaeger) Traces(ctx context.Context, service string) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {"1000"}}
	return j.get(ctx, "/api/traces?"+q.Encode())
}

// TraceByID returns one trace by its id (hex, as trace.TraceID.String()
// gives it) through the v1 API /api/traces/ID.
func (j *Jaeger) TraceByID(ctx context.Context, traceID string) (Trace, error) {
	trs, err := j.get(ctx, "/api/traces/"+url.PathEscape(traceID))
	if err != nil {
		return Trace{}, err
	}
	if len(trs) != 1 {
		return Trace{}, fmt.Errorf("jaegerserver: trace %s: got %d traces", traceID, len(trs))
	}
	return trs[0], nil
}

// Services returns the names of the services Jaeger holds spans of,
// through the v1 API /api/services.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var r struct {
		Data []string `json:"data"`
	}
	if err := j.getJSON(ctx, "/api/services", &r); err != nil {
		return nil, err
	}
	sort.Strings(r.Data)
	return r.Data, nil
}

func (j *Jaeger) get(ctx context.Context, path string) ([]Trace, error) {
	body, err := j.fetch(ctx, path)
	if err != nil {
		return nil, err
	}
	trs, err := decode(body)
	if err != nil {
		return nil, fmt.Errorf("jaegerserver: GET %s: %w", path, err)
	}
	return trs, nil
}

func (j *Jaeger) getJSON(ctx context.Context, path string, v any) error {
	body, err := j.fetch(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("jaegerserver: GET %s: decoding %s: %w", path, truncate(body, 200), err)
	}
	return nil
}

// fetch GETs path from the query service and returns the body of a 200.
func (j *Jaeger) fetch(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := j.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("jaegerserver: GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaegerserver: GET %s: %s: %s", path, resp.Status, truncate(body, 500))
	}
	return body, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// Trace is one trace as Jaeger stored it.
type Trace struct {
	ID    string // 32 hex digits, as trace.TraceID.String() gives it
	Spans []Span // ordered by start time
}

// Span is one span. Jaeger's v1 API carries the span's kind, status and
// instrumentation scope as tags (span.kind, otel.status_code, error,
// otel.scope.name).
type Span struct {
	TraceID      string // 32 hex digits
	SpanID       string // 16 hex digits, as trace.SpanID.String() gives it
	ParentSpanID string // "" for a root span
	// Links are the span ids of the span's links (Jaeger's FOLLOWS_FROM
	// references, and CHILD_OF references after the parent).
	Links     []string
	Operation string // the span's name
	Service   string // the resource's service.name
	Start     time.Time
	Duration  time.Duration // to the microsecond
	// Tags are the span's attributes, every value as text: "42" for an int
	// (Jaeger may return it as a number or a string), "true", "1.5".
	Tags map[string]string
}

// Tag returns the span's tag k, or "" if it has none.
func (s Span) Tag(k string) string { return s.Tags[k] }

// ByName returns the trace's spans named op, in start order.
func (tr Trace) ByName(op string) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.Operation == op {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the spans whose parent is s, in start order.
func (tr Trace) Children(s Span) []Span {
	var out []Span
	for _, c := range tr.Spans {
		if c.ParentSpanID == s.SpanID && c.TraceID == s.TraceID && c.SpanID != s.SpanID {
			out = append(out, c)
		}
	}
	return out
}

// Roots returns the spans whose parent is not in the trace (the root span,
// or the top of each fragment while spans are still arriving).
func (tr Trace) Roots() []Span {
	ids := make(map[string]bool, len(tr.Spans))
	for _, s := range tr.Spans {
		ids[s.SpanID] = true
	}
	var out []Span
	for _, s := range tr.Spans {
		if !ids[s.ParentSpanID] {
			out = append(out, s)
		}
	}
	return out
}

// String renders the trace as an indented tree, for failure messages.
func (tr Trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s (%d spans)", tr.ID, len(tr.Spans))
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "\n%s%s [%s] %s %v", strings.Repeat("  ", depth+1), s.Operation, s.Service, s.SpanID, s.Duration)
		keys := make([]string, 0, len(s.Tags))
		for k := range s.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%q", k, s.Tags[k])
		}
		if depth < 64 {
			for _, c := range tr.Children(s) {
				walk(c, depth+1)
			}
		}
	}
	for _, r := range tr.Roots() {
		walk(r, 0)
	}
	return b.String()
}

// The v1 query API's JSON (Jaeger's UI model).
type apiResponse struct {
	Data   []apiTrace `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

type apiTrace struct {
	TraceID   string                `json:"traceID"`
	Spans     []apiSpan             `json:"spans"`
	Processes map[string]apiProcess `json:"processes"`
}

type apiSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []apiRef    `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []apiKV     `json:"tags"`
	ProcessID     string      `json:"processID"`
	Process       *apiProcess `json:"process"`
}

type apiRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type apiProcess struct {
	ServiceName string `json:"serviceName"`
}

type apiKV struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func decode(body []byte) ([]Trace, error) {
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", truncate(body, 200), err)
	}
	if len(r.Errors) > 0 {
		var msgs []string
		for _, e := range r.Errors {
			msgs = append(msgs, fmt.Sprintf("%d %s", e.Code, e.Msg))
		}
		return nil, fmt.Errorf("query errors: %s", strings.Join(msgs, "; "))
	}
	out := make([]Trace, 0, len(r.Data))
	for _, at := range r.Data {
		tr := Trace{ID: padHex(at.TraceID, 32), Spans: make([]Span, 0, len(at.Spans))}
		for _, as := range at.Spans {
			s := Span{
				TraceID:   padHex(as.TraceID, 32),
				SpanID:    padHex(as.SpanID, 16),
				Operation: as.OperationName,
				Start:     time.UnixMicro(as.StartTime),
				Duration:  time.Duration(as.Duration) * time.Microsecond,
				Tags:      make(map[string]string, len(as.Tags)),
			}
			if as.Process != nil {
				s.Service = as.Process.ServiceName
			} else {
				s.Service = at.Processes[as.ProcessID].ServiceName
			}
			for _, ref := range as.References {
				if ref.RefType == "CHILD_OF" && s.ParentSpanID == "" && padHex(ref.TraceID, 32) == s.TraceID {
					s.ParentSpanID = padHex(ref.SpanID, 16)
					continue
				}
				s.Links = append(s.Links, padHex(ref.SpanID, 16))
			}
			for _, kv := range as.Tags {
				s.Tags[kv.Key] = tagText(kv.Value)
			}
			tr.Spans = append(tr.Spans, s)
		}
		sort.SliceStable(tr.Spans, func(a, b int) bool {
			sa, sb := tr.Spans[a], tr.Spans[b]
			if !sa.Start.Equal(sb.Start) {
				return sa.Start.Before(sb.Start)
			}
			return sa.SpanID < sb.SpanID
		})
		out = append(out, tr)
	}
	return out, nil
}

// padHex left-pads a hex id with zeros: Jaeger's v1 model prints a trace
// id whose high 64 bits are zero as 16 digits.
func padHex(id string, n int) string {
	id = strings.ToLower(id)
	if len(id) < n {
		return strings.Repeat("0", n-len(id)) + id
	}
	return id
}

// tagText turns a tag's JSON value into text: a string as itself, a
// number or bool as its JSON text.
func tagText(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return string(v)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
