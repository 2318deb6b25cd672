package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The peers: programs of their own modules (bench/peers/NAME, run with
// `go run -C`) that measure another system on Tollgate's workloads and
// write a JSON report of one shape. The main module never imports them.
const (
	peerTemporal = "temporal" // Temporal's own server (bench/peers/temporal)
	peerRiver    = "river"    // River, a job queue on PostgreSQL (bench/peers/river)
)

// defaultPG is the PostgreSQL server both peers run on: this machine's,
// trust auth on loopback, its admin database.
const defaultPG = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// peerConfig is what the peer flags set.
type peerConfig struct {
	temporalJSON, temporalDir string
	riverJSON, riverDir       string
	temporalFlags, riverFlags string // more flags for each, split at spaces
	pg                        string
}

// peerFlags registers the flags of -peers on fs.
func peerFlags(fs *flag.FlagSet, pc *peerConfig) {
	fs.StringVar(&pc.temporalJSON, "temporal-json", "", "with -peers: use this report of the Temporal peer (its -json) instead of running it")
	fs.StringVar(&pc.temporalDir, "temporal-dir", "bench/peers/temporal", "with -peers: the Temporal peer's module")
	fs.StringVar(&pc.riverJSON, "river-json", "", "with -peers: use this report of the River peer (its -json) instead of running it")
	fs.StringVar(&pc.riverDir, "river-dir", "bench/peers/river", "with -peers: the River peer's module")
	fs.StringVar(&pc.temporalFlags, "temporal-flags", "", "with -peers: more flags for the Temporal peer, e.g. '-tuned' or '-shards 8' (go run -C bench/peers/temporal . -help)")
	fs.StringVar(&pc.riverFlags, "river-flags", "", "with -peers: more flags for the River peer, e.g. '-fetch-cooldown 1ms' (go run -C bench/peers/river . -help)")
	fs.StringVar(&pc.pg, "pg", defaultPG, "with -peers: the PostgreSQL server both peers run on (URL of its admin database; each creates and drops databases of its own beside it)")
}

// check is what parseFlags adds for the peer flags.
func (pc peerConfig) check(peers bool) error {
	if !peers && (pc.temporalJSON != "" || pc.riverJSON != "" || pc.temporalFlags != "" || pc.riverFlags != "") {
		return errors.New("-temporal-json, -river-json, -temporal-flags and -river-flags go with -peers")
	}
	return nil
}

// peerSpec is one peer as this run sees it.
type peerSpec struct {
	name  string   // the report's peer field
	title string   // its column until a report says more
	dir   string   // its module
	saved string   // a report to read instead of running it
	args  []string // flags beyond the shared -n, -duration, -clients, -warmup
	keys  []string // the workloads it runs, by the shared key
}

func (b *bench) peerSpecs() []peerSpec {
	pc := b.cfg.peer
	return []peerSpec{
		{name: peerTemporal, title: "Temporal (PostgreSQL)", dir: pc.temporalDir, saved: pc.temporalJSON,
			args: append([]string{"-store", "postgres", "-pg", pc.pg}, strings.Fields(pc.temporalFlags)...),
			keys: []string{"one-step", "three-step", "fan-10", "fan-100", "approve", "sustained"}},
		{name: peerRiver, title: "River (PostgreSQL)", dir: pc.riverDir, saved: pc.riverJSON,
			args: append([]string{"-pg", pc.pg}, strings.Fields(pc.riverFlags)...),
			keys: []string{"dispatch", "one-step", "three-step", "fan-10", "fan-100", "sustained"}},
	}
}

// peerRun is one peer in a -peers run: its report, or why there is none.
type peerRun struct {
	spec    peerSpec
	report  *peerReport
	err     error  // it failed
	skipped string // it was not run, and why
}

// savedPeers reads the saved reports (-temporal-json, -river-json) before
// minutes of measuring, so a bad file fails first; the other peers are
// left for runPeers.
func (b *bench) savedPeers() ([]*peerRun, error) {
	var runs []*peerRun
	for _, s := range b.peerSpecs() {
		r := &peerRun{spec: s}
		if s.saved != "" {
			p, err := readPeerReport(s.saved, s.name)
			if err != nil {
				return nil, err
			}
			r.report = p
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// runPeers runs, one after the other, each peer that has no report yet,
// with this run's -n, -duration, -clients and -warmup. A peer that fails
// is recorded in its run, and the others still run: the error returned
// joins their failures, for the caller to report once everything is
// written.
func (b *bench) runPeers(ctx context.Context, runs []*peerRun) error {
	var errs []error
	for _, r := range runs {
		if r.report != nil {
			continue
		}
		only, ok := peerOnly(b.cfg.only, r.spec.keys)
		if !ok {
			r.skipped = "-only names none of its workloads"
			continue
		}
		r.report, r.err = b.runPeer(ctx, r.spec, only)
		if r.err != nil {
			b.progress("peers: %s failed: %v", r.spec.name, r.err)
			errs = append(errs, r.err)
		}
	}
	return errors.Join(errs...)
}

// peerOnly is the -only a peer gets: "" for all its workloads, one key
// when -only selects exactly one of them (a peer takes one), and not ok
// when -only selects none of them. Tollgate's dispatch figure comes from
// its one-step and three-step workloads, so those select it too.
func peerOnly(only, keys []string) (string, bool) {
	if len(only) == 0 {
		return "", true
	}
	var sel []string
	for _, k := range only {
		if slices.Contains(keys, k) {
			sel = append(sel, k)
		}
		if (k == "one-step" || k == "three-step") && slices.Contains(keys, "dispatch") && !slices.Contains(sel, "dispatch") {
			sel = append(sel, "dispatch")
		}
	}
	switch len(sel) {
	case 0:
		return "", false
	case 1:
		return sel[0], true
	}
	return "", true
}

// runPeer runs one peer (`go run -C DIR .`: its own module, built from
// the module cache) and reads its JSON report. Its progress goes to
// stderr.
func (b *bench) runPeer(ctx context.Context, s peerSpec, only string) (*peerReport, error) {
	dir, err := os.MkdirTemp(b.cfg.dir, "tollgate-bench-"+s.name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, s.name+".json")
	args := append([]string{"run", "-C", s.dir, ".", "-json", out,
		"-n", strconv.Itoa(b.cfg.n), "-duration", b.cfg.duration.String(), "-clients", strconv.Itoa(b.cfg.clients),
		"-warmup", strconv.Itoa(b.cfg.warmup)}, s.args...)
	if only != "" {
		args = append(args, "-only", only)
	}
	b.progress("peers: go %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the %s peer (go %s): %w", s.name, strings.Join(args, " "), err)
	}
	return readPeerReport(out, s.name)
}

// peerReport is what a peer writes with -json: the parts the comparison
// reads.
type peerReport struct {
	Peer        string            `json:"peer"`
	Versions    map[string]string `json:"versions"`
	Machine     map[string]any    `json:"machine"`
	Setup       []string          `json:"setup"`
	Params      map[string]any    `json:"params"`
	Postgres    map[string]string `json:"postgres"`
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

// readPeerReport reads a report that peer wrote; another peer's is an
// error.
func readPeerReport(path, peer string) (*peerReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s report: %w", peer, err)
	}
	var p peerReport
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s report %s: %w", peer, path, err)
	}
	if p.Peer != peer || len(p.Results) == 0 {
		return nil, fmt.Errorf("%s report %s: not a report of the %s peer (peer %q, %d results)", peer, path, peer, p.Peer, len(p.Results))
	}
	p.raw = b
	return &p, nil
}

// title is the peer's column heading: the system and where it keeps its
// state, and any setting that is not its default.
func (p *peerReport) title() string {
	switch p.Peer {
	case peerTemporal:
		t := "Temporal (SQLite in memory)"
		if p.Params["store"] == "postgres" {
			t = "Temporal (PostgreSQL)"
		}
		if p.Params["tuned"] == true {
			t += ", tuned"
		}
		return t
	case peerRiver:
		t := "River (PostgreSQL)"
		if c, ok := p.Params["fetch_cooldown"].(string); ok && c != "100ms" {
			t += ", FetchCooldown " + c
		}
		return t
	}
	return p.Peer
}

// about is one sentence on the peer's run: versions, persistence, when.
func (p *peerReport) about() string {
	when := fmt.Sprintf("its run: %s, %.0f s, load average %s before, %s after; n = %v, sustained %v with %v clients",
		p.Date, p.WallSeconds, p.LoadBefore, p.LoadAfter, p.Params["n"], p.Params["duration"], p.Params["clients"])
	pg := fmt.Sprintf("PostgreSQL %s (fsync %s, synchronous_commit %s: every commit waits for the disk)",
		strings.Fields(p.Postgres["server_version"] + " ?")[0], p.Postgres["fsync"], p.Postgres["synchronous_commit"])
	switch p.Peer {
	case peerTemporal:
		if p.Params["store"] == "postgres" {
			return fmt.Sprintf("Temporal server %s (`temporal.NewServer`, all services in one process), Go SDK %s, on %s, %v history shards, default matching settings; %s.",
				p.Versions["server"], p.Versions["sdk"], pg, p.Params["shards"], when)
		}
		return fmt.Sprintf("Temporal server %s (`temporaltest`), Go SDK %s, on SQLite in memory with one history shard, nothing fsynced; %s.",
			p.Versions["server"], p.Versions["sdk"], when)
	case peerRiver:
		return fmt.Sprintf("River %s (riverpgxv5, pgx %s) on %s; MaxWorkers %v, FetchCooldown %v, a pool of %v connections; each job completed in the worker's own transaction (JobCompleteTx), a chain's next step inserted in it (InsertTx); %s.",
			p.Versions["river"], p.Versions["pgx"], pg, p.Params["max_workers"], p.Params["fetch_cooldown"], p.Params["max_conns"], when)
	}
	return when + "."
}

// comparedKeys are the rows of the side-by-side, in DESIGN.md §12's order.
var comparedKeys = []string{"dispatch", "one-step", "three-step", "fan-10", "fan-100", "sustained", "approve"}

// Comparison is the side-by-side document (-peers).
type Comparison struct {
	Tollgate *Report      `json:"tollgate"`
	Peers    []PeerColumn `json:"peers"`
	Rows     []PeerRow    `json:"rows"`
	Notes    []string     `json:"notes"`
	runs     []*peerRun
}

// PeerColumn is one peer: its report as it wrote it, or why there is none.
type PeerColumn struct {
	Name    string          `json:"name"`
	Title   string          `json:"title"`
	Report  json.RawMessage `json:"report,omitempty"`
	Error   string          `json:"error,omitempty"`
	Skipped string          `json:"skipped,omitempty"`
}

// PeerRow is one workload on Tollgate and every peer.
type PeerRow struct {
	Key                  string     `json:"key"`
	Figure               string     `json:"figure"`
	Goal                 string     `json:"goal"`
	TollgateP50Ms        float64    `json:"tollgate_p50_ms,omitempty"`
	TollgateP99Ms        float64    `json:"tollgate_p99_ms,omitempty"`
	TollgateStepsPerSec  float64    `json:"tollgate_steps_per_sec,omitempty"`
	TollgateMeasured     string     `json:"tollgate_measured"`
	TollgateFigureSource string     `json:"tollgate_figure_source,omitempty"`
	Peers                []PeerCell `json:"peers"` // in the order of Comparison.Peers
}

// PeerCell is one peer's figure for a row. Ratios are how many times
// better Tollgate did: peer ÷ Tollgate for latencies, Tollgate ÷ peer for
// throughput; 0 when either side lacks the figure.
type PeerCell struct {
	Peer            string  `json:"peer"`
	Figure          string  `json:"figure,omitempty"` // the peer's own name for what it timed
	P50Ms           float64 `json:"p50_ms,omitempty"`
	P99Ms           float64 `json:"p99_ms,omitempty"`
	StepsPerSec     float64 `json:"steps_per_sec,omitempty"`
	Measured        string  `json:"measured"`
	RatioP50        float64 `json:"ratio_p50,omitempty"`
	RatioP99        float64 `json:"ratio_p99,omitempty"`
	RatioThroughput float64 `json:"ratio_throughput,omitempty"`
}

// compare lines Tollgate's report and the peers' up by workload key. A
// row is kept when any side measured it.
func compare(t *Report, runs []*peerRun) *Comparison {
	c := &Comparison{Tollgate: t, runs: runs}
	for _, r := range runs {
		col := PeerColumn{Name: r.spec.name, Title: r.spec.title, Skipped: r.skipped}
		if r.report != nil {
			col.Title, col.Report = r.report.title(), r.report.raw
		}
		if r.err != nil {
			col.Error = r.err.Error()
		}
		c.Peers = append(c.Peers, col)
	}
	for _, key := range comparedKeys {
		row, found := compareRow(t, runs, key)
		if found {
			c.Rows = append(c.Rows, row)
		}
	}
	c.Notes = []string{
		"All on this machine, one after the other: Tollgate's workloads, then each peer's; each workload on a fresh server and store with one worker/executor and one shared client; every step a no-op.",
		"Tollgate: redis-server with AOF (appendfsync " + fmt.Sprint(t.Params["fsync"]) + "): with everysec a commit does not wait for the disk, which PostgreSQL's synchronous_commit does; `-fsync always` makes Tollgate wait too.",
		"Ratios: peer ÷ Tollgate for latencies, Tollgate ÷ peer for throughput; above 1, Tollgate is ahead.",
	}
	for _, r := range runs {
		switch {
		case r.report != nil:
			c.Notes = append(c.Notes, r.report.title()+": "+r.report.about())
		case r.err != nil:
			c.Notes = append(c.Notes, r.spec.title+": failed: "+r.err.Error())
		case r.skipped != "":
			c.Notes = append(c.Notes, r.spec.title+": not run: "+r.skipped)
		}
	}
	return c
}

func compareRow(t *Report, runs []*peerRun, key string) (PeerRow, bool) {
	row := PeerRow{Key: key, TollgateMeasured: "not run", Goal: "—"}
	if f, ok := figureOf(key); ok {
		row.Figure, row.Goal = f.name, f.goal
	}
	found := false
	if i := slices.IndexFunc(t.Results, func(r Result) bool { return r.Key == key }); i >= 0 {
		tr := t.Results[i]
		found = true
		row.Figure, row.Goal = tr.Figure, tr.Goal
		row.TollgateP50Ms, row.TollgateP99Ms, row.TollgateStepsPerSec = tr.P50Ms, tr.P99Ms, tr.StepsPerSec
		if key == "approve" {
			// Like for like: Temporal times signal sent → activity
			// started on the worker; the tool call beginning on the
			// executor is the same moment. §12's goal is to the lease.
			row.Figure = "approve → governed step starts (Temporal: signal → activity started)"
			row.Goal = "— (§12's, to the lease: " + tr.Goal + ")"
			row.TollgateP50Ms, row.TollgateP99Ms = tr.Extra["decide_to_tool_call_p50_ms"], tr.Extra["decide_to_tool_call_p99_ms"]
			row.TollgateFigureSource = "Decide sent → the tool call began on the executor"
		}
		row.TollgateMeasured = peerSummary(row.TollgateP50Ms, row.TollgateP99Ms, row.TollgateStepsPerSec)
	}
	for _, r := range runs {
		cell := PeerCell{Peer: r.spec.name, Measured: "—"}
		if r.report != nil {
			if i := slices.IndexFunc(r.report.Results, func(p peerResult) bool { return p.Key == key }); i >= 0 {
				pr := r.report.Results[i]
				found = true
				cell.Figure, cell.P50Ms, cell.P99Ms, cell.StepsPerSec = pr.Figure, pr.P50Ms, pr.P99Ms, pr.StepsPerSec
				cell.Measured = peerSummary(pr.P50Ms, pr.P99Ms, pr.StepsPerSec)
			} else if slices.Contains(r.spec.keys, key) {
				cell.Measured = "not run"
			}
		} else if r.err != nil && slices.Contains(r.spec.keys, key) {
			cell.Measured = "failed"
		}
		cell.RatioP50 = ratio(cell.P50Ms, row.TollgateP50Ms)
		cell.RatioP99 = ratio(cell.P99Ms, row.TollgateP99Ms)
		cell.RatioThroughput = ratio(row.TollgateStepsPerSec, cell.StepsPerSec)
		row.Peers = append(row.Peers, cell)
	}
	return row, found
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

// ratios is a cell's ratio column: throughput and p99 for a throughput
// row, p50 and p99 otherwise.
func (c PeerCell) ratios() string {
	switch {
	case c.RatioThroughput > 0:
		return fmt.Sprintf("%s steps/s; p99 %s", fmtRatio(c.RatioThroughput), fmtRatio(c.RatioP99))
	case c.RatioP50 > 0 || c.RatioP99 > 0:
		return fmt.Sprintf("p50 %s, p99 %s", fmtRatio(c.RatioP50), fmtRatio(c.RatioP99))
	}
	return "—"
}

// Markdown is the side-by-side table: goal, Tollgate, each peer, then each
// peer's ratios, with the notes above and what each peer timed below.
func (c *Comparison) Markdown() string {
	var b strings.Builder
	var titles []string
	for _, p := range c.Peers {
		titles = append(titles, p.Title)
	}
	fmt.Fprintf(&b, "## Side by side: Tollgate, %s\n\n", strings.Join(titles, ", "))
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n| figure | goal | Tollgate |")
	for _, p := range c.Peers {
		fmt.Fprintf(&b, " %s |", p.Title)
	}
	for _, p := range c.Peers {
		fmt.Fprintf(&b, " %s ÷ Tollgate |", strings.Fields(p.Title)[0])
	}
	b.WriteString("\n| --- | --- | --- |" + strings.Repeat(" --- | --- |", len(c.Peers)) + "\n")
	for _, r := range c.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s |", r.Figure, r.Goal, r.TollgateMeasured)
		for _, p := range r.Peers {
			fmt.Fprintf(&b, " %s |", p.Measured)
		}
		for _, p := range r.Peers {
			fmt.Fprintf(&b, " %s |", p.ratios())
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, r := range c.Rows {
		if r.TollgateFigureSource != "" {
			fmt.Fprintf(&b, "- %s: Tollgate's figure here is %s (the §12 figure, to the lease, is in the table above).\n", r.Key, r.TollgateFigureSource)
		}
	}
	// What each peer timed, in its own words.
	for i, p := range c.Peers {
		var timed []string
		for _, r := range c.Rows {
			if f := r.Peers[i].Figure; f != "" {
				timed = append(timed, r.Key+": "+f)
			}
		}
		if len(timed) > 0 {
			fmt.Fprintf(&b, "- %s timed %s.\n", p.Title, strings.Join(timed, "; "))
		}
	}
	return b.String()
}

// JSON is the comparison as indented JSON.
func (c *Comparison) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	return append(b, '\n'), err
}
