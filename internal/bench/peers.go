package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// peerReport is what the Temporal peer (bench/peers/temporal) writes with
// -json: the parts the comparison reads.
type peerReport struct {
	Peer        string            `json:"peer"`
	Versions    map[string]string `json:"versions"`
	Machine     map[string]any    `json:"machine"`
	Setup       []string          `json:"setup"`
	Params      map[string]any    `json:"params"`
	Date        string            `json:"date"`
	WallSeconds float64           `json:"wall_seconds"`
	LoadBefore  string            `json:"loadavg_before"`
	LoadAfter   string            `json:"loadavg_after"`
	Results     []peerResult      `json:"results"`

	raw json.RawMessage // the whole report, as the peer wrote it
}

type peerResult struct {
	Key         string             `json:"key"`
	Figure      string             `json:"figure"`
	Runs        int                `json:"runs"`
	Clients     int                `json:"clients,omitempty"`
	P50Ms       float64            `json:"p50_ms"`
	P99Ms       float64            `json:"p99_ms"`
	MaxMs       float64            `json:"max_ms"`
	StepsPerSec float64            `json:"steps_per_sec,omitempty"`
	Extra       map[string]float64 `json:"extra,omitempty"`
}

func readPeerReport(path string) (*peerReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("temporal report: %w", err)
	}
	var p peerReport
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("temporal report %s: %w", path, err)
	}
	if p.Peer != "temporal" || len(p.Results) == 0 {
		return nil, fmt.Errorf("temporal report %s: not a report of the Temporal peer (peer %q, %d results)", path, p.Peer, len(p.Results))
	}
	p.raw = b
	return &p, nil
}

// runTemporal runs the Temporal peer with this run's -n, -duration,
// -clients and -warmup (`go run -C DIR .`: its own module, built from the
// module cache) and reads its JSON report. Its progress goes to stderr.
func (b *bench) runTemporal(ctx context.Context) (*peerReport, error) {
	dir, err := os.MkdirTemp(b.cfg.dir, "tollgate-bench-temporal-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "temporal.json")
	args := []string{"run", "-C", b.cfg.temporalDir, ".", "-json", out,
		"-n", strconv.Itoa(b.cfg.n), "-duration", b.cfg.duration.String(), "-clients", strconv.Itoa(b.cfg.clients),
		"-warmup", strconv.Itoa(b.cfg.warmup)}
	if len(b.cfg.only) == 1 && peerKnows(b.cfg.only[0]) {
		args = append(args, "-only", b.cfg.only[0])
	}
	b.progress("peers: go %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the Temporal peer (go %s): %w", strings.Join(args, " "), err)
	}
	return readPeerReport(out)
}

// peerWorkloads are the workloads both programs run, by their shared key.
var peerWorkloads = []string{"one-step", "three-step", "fan-10", "fan-100", "approve", "sustained"}

func peerKnows(key string) bool { return slices.Contains(peerWorkloads, key) }

// Comparison is the side-by-side document (-peers).
type Comparison struct {
	Tollgate *Report         `json:"tollgate"`
	Temporal json.RawMessage `json:"temporal"` // the peer's report as it wrote it
	Rows     []PeerRow       `json:"rows"`
	Notes    []string        `json:"notes"`
	peer     *peerReport
}

// PeerRow is one workload on both. Ratios are how many times better
// Tollgate did: Temporal ÷ Tollgate for latencies, Tollgate ÷ Temporal
// for throughput; 0 when either side lacks the figure.
type PeerRow struct {
	Key                  string  `json:"key"`
	Figure               string  `json:"figure"`
	TollgateP50Ms        float64 `json:"tollgate_p50_ms,omitempty"`
	TollgateP99Ms        float64 `json:"tollgate_p99_ms,omitempty"`
	TemporalP50Ms        float64 `json:"temporal_p50_ms,omitempty"`
	TemporalP99Ms        float64 `json:"temporal_p99_ms,omitempty"`
	TollgateStepsPerSec  float64 `json:"tollgate_steps_per_sec,omitempty"`
	TemporalStepsPerSec  float64 `json:"temporal_steps_per_sec,omitempty"`
	RatioP50             float64 `json:"ratio_p50,omitempty"`
	RatioP99             float64 `json:"ratio_p99,omitempty"`
	RatioThroughput      float64 `json:"ratio_throughput,omitempty"`
	TollgateMeasured     string  `json:"tollgate_measured"`
	TemporalMeasured     string  `json:"temporal_measured"`
	TollgateFigureSource string  `json:"tollgate_figure_source,omitempty"`
}

// compare lines the two reports up by workload key.
func compare(t *Report, p *peerReport) *Comparison {
	c := &Comparison{Tollgate: t, Temporal: p.raw, peer: p}
	find := func(key string) (*Result, *peerResult) {
		var tr *Result
		var pr *peerResult
		for i := range t.Results {
			if t.Results[i].Key == key {
				tr = &t.Results[i]
			}
		}
		for i := range p.Results {
			if p.Results[i].Key == key {
				pr = &p.Results[i]
			}
		}
		return tr, pr
	}
	for _, key := range peerWorkloads {
		tr, pr := find(key)
		if tr == nil && pr == nil {
			continue
		}
		row := PeerRow{Key: key, TollgateMeasured: "not run", TemporalMeasured: "not run"}
		if f, ok := figureOf(key); ok {
			row.Figure = f.name
		}
		if tr != nil {
			row.Figure = tr.Figure
			row.TollgateP50Ms, row.TollgateP99Ms, row.TollgateStepsPerSec = tr.P50Ms, tr.P99Ms, tr.StepsPerSec
			if key == "approve" {
				// Like for like: Temporal times signal sent → activity
				// started on the worker; the tool call beginning on the
				// executor is the same moment.
				row.Figure = "approve → governed step starts (Temporal: signal → activity started)"
				row.TollgateP50Ms, row.TollgateP99Ms = tr.Extra["decide_to_tool_call_p50_ms"], tr.Extra["decide_to_tool_call_p99_ms"]
				row.TollgateFigureSource = "Decide sent → the tool call began on the executor"
			}
			row.TollgateMeasured = peerSummary(row.TollgateP50Ms, row.TollgateP99Ms, row.TollgateStepsPerSec)
		}
		if pr != nil {
			row.TemporalP50Ms, row.TemporalP99Ms, row.TemporalStepsPerSec = pr.P50Ms, pr.P99Ms, pr.StepsPerSec
			row.TemporalMeasured = peerSummary(pr.P50Ms, pr.P99Ms, pr.StepsPerSec)
		}
		row.RatioP50 = ratio(row.TemporalP50Ms, row.TollgateP50Ms)
		row.RatioP99 = ratio(row.TemporalP99Ms, row.TollgateP99Ms)
		row.RatioThroughput = ratio(row.TollgateStepsPerSec, row.TemporalStepsPerSec)
		c.Rows = append(c.Rows, row)
	}
	c.Notes = []string{
		"Both on this machine, one after the other, each workload on a fresh server with one worker/executor and one shared client connection; every step a no-op.",
		"Tollgate: redis-server with AOF (appendfsync " + fmt.Sprint(t.Params["fsync"]) + "). Temporal: temporaltest, SQLite in memory, one history shard, nothing fsynced.",
		"Ratios: Temporal ÷ Tollgate for latencies, Tollgate ÷ Temporal for throughput; above 1, Tollgate is ahead.",
	}
	return c
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

func peerSummary(p50, p99, rate float64) string {
	if rate > 0 {
		return fmt.Sprintf("%s steps/s, p99 %s", thousands(rate), fmtMs(p99))
	}
	if p50 <= 0 && p99 <= 0 {
		return "—"
	}
	return fmt.Sprintf("p50 %s, p99 %s", fmtMs(p50), fmtMs(p99))
}

func fmtRatio(r float64) string {
	switch {
	case r <= 0:
		return "—"
	case r >= 10:
		return fmt.Sprintf("%.0f×", r)
	default:
		return fmt.Sprintf("%.1f×", r)
	}
}

// Markdown is the side-by-side table.
func (c *Comparison) Markdown() string {
	var b strings.Builder
	p := c.peer
	fmt.Fprintf(&b, "## Side by side: Tollgate and Temporal %s (`temporaltest`)\n\n", p.Versions["server"])
	fmt.Fprintf(&b, "Temporal server %s, Go SDK %s; its run: %s, %.0f s, load average %s before, %s after; n = %v, sustained %v with %v clients.\n\n",
		p.Versions["server"], p.Versions["sdk"], p.Date, p.WallSeconds, p.LoadBefore, p.LoadAfter, p.Params["n"], p.Params["duration"], p.Params["clients"])
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n| workload | Tollgate | Temporal | Temporal ÷ Tollgate (throughput: Tollgate ÷ Temporal) |\n| --- | --- | --- | --- |\n")
	for _, r := range c.Rows {
		rat := "—"
		switch {
		case r.RatioThroughput > 0:
			rat = fmt.Sprintf("%s steps/s; p99 %s", fmtRatio(r.RatioThroughput), fmtRatio(r.RatioP99))
		case r.RatioP50 > 0 || r.RatioP99 > 0:
			rat = fmt.Sprintf("p50 %s, p99 %s", fmtRatio(r.RatioP50), fmtRatio(r.RatioP99))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Figure, r.TollgateMeasured, r.TemporalMeasured, rat)
	}
	for _, r := range c.Rows {
		if r.TollgateFigureSource != "" {
			fmt.Fprintf(&b, "\n%s: Tollgate's figure here is %s (the §12 figure, to the lease, is in the table above).\n", r.Key, r.TollgateFigureSource)
		}
	}
	return b.String()
}

// JSON is the comparison as indented JSON.
func (c *Comparison) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	return append(b, '\n'), err
}
