package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var adminRe = regexp.MustCompile(`msg=serving .* admin=(\S+)`)

// adminAddr is the admin listener the plane logged it serves.
func adminAddr(t *testing.T, p *plane) string {
	t.Helper()
	m := adminRe.FindStringSubmatch(p.stderr.String())
	if m == nil || m[1] == `""` {
		t.Fatalf("the plane logged no admin address:\n%s", p.stderr)
	}
	return m[1]
}

// get fetches http://addr/path and returns the status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// exposition is one scrape of /metrics, parsed by Prometheus' own text
// parser.
type exposition struct {
	t        *testing.T
	text     string
	families map[string]*dto.MetricFamily
}

func scrape(t *testing.T, addr string) exposition {
	t.Helper()
	code, body := get(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, body)
	}
	return exposition{t: t, text: body, families: fams}
}

// value is the value of the series name{label=value} (label "" for the
// series without labels): a counter's or a gauge's, a histogram's count.
func (e exposition) value(name, label, value string) float64 {
	e.t.Helper()
	f := e.families[name]
	if f == nil {
		e.t.Fatalf("no %s in the exposition:\n%s", name, e.text)
	}
	for _, m := range f.GetMetric() {
		match := label == "" && len(m.GetLabel()) == 0
		for _, l := range m.GetLabel() {
			match = match || (l.GetName() == label && l.GetValue() == value)
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	e.t.Fatalf("no series %s{%s=%q} in the exposition:\n%s", name, label, value, e.text)
	return 0
}

// series every scrape of a control plane with an admin listener shows.
var series = []string{
	"tollgate_runs_started_total", "tollgate_runs_ended_total", "tollgate_runs", "tollgate_asks", "tollgate_asks_opened_total",
	"tollgate_ask_expiries_total", "tollgate_answers_total", "tollgate_ask_replies_total", "tollgate_step_redispatches_total",
	"tollgate_leases_lost_total", "tollgate_steps_in_doubt_total",
	"tollgate_dispatch_latency_seconds", "tollgate_step_duration_seconds", "tollgate_fan_parallelism",
}

// A control plane on Redis with an executor process: /metrics is scraped
// over HTTP while a fan runs, while the run is parked at its gate, and
// after it completes. The gauges come from the Redis store's counts.
func TestMetricsScrapedDuringAndAfterARunWithAFan(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, []string{"--admin-listen", "127.0.0.1:0", "--pprof"}, "edge-1")
	admin := adminAddr(t, c.plane)

	id := c.start("together naps:\n  a: test.sleep {\"ms\": 1000}\n  b: test.sleep {\"ms\": 1000}\n" +
		"ask me:\n  mark it?\nm: test.mark {\"name\": \"after\"}\n")
	// While the naps run (or, on a slow machine, already parked): one
	// live run, counted from the store.
	e := scrape(t, admin)
	if n := e.value("tollgate_runs_started_total", "", ""); n != 1 {
		t.Fatalf("runs started: %v, want 1", n)
	}
	if live := e.value("tollgate_runs", "state", "running") + e.value("tollgate_runs", "state", "blocked") + e.value("tollgate_runs", "state", "parked"); live != 1 {
		t.Fatalf("live runs in the store: %v, want 1", live)
	}

	r := c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
	e = scrape(t, admin)
	for _, w := range []struct {
		name, label, value string
		n                  float64
	}{
		{"tollgate_runs", "state", "parked", 1},
		{"tollgate_asks", "state", "pending", 1},
		{"tollgate_step_duration_seconds", "outcome", "succeeded", 2},
		{"tollgate_runs_ended_total", "outcome", "complete", 0},
		{"tollgate_step_redispatches_total", "reason", "lease_lost", 0},
	} {
		if got := e.value(w.name, w.label, w.value); got != w.n {
			t.Errorf("while parked: %s{%s=%q} = %v, want %v", w.name, w.label, w.value, got, w.n)
		}
	}
	if n := e.value("tollgate_dispatch_latency_seconds", "", ""); n != 2 {
		t.Errorf("while parked: %v dispatches measured, want the two naps", n)
	}
	if n := e.value("tollgate_fan_parallelism", "", ""); n != 1 {
		t.Errorf("while parked: %v fans finished, want 1", n)
	}
	// Two 1s naps at once: parallelism near 2. A branch's time is its
	// lease to its finish, inside the fan's wall, so a fan run a branch at
	// a time is at most 1 whatever the machine's load; a loaded CI machine
	// may lease the second branch a few hundred ms late (1.26 was seen
	// with 600ms naps), so the bar is just above 1.
	if sum := e.families["tollgate_fan_parallelism"].GetMetric()[0].GetHistogram().GetSampleSum(); sum < 1.1 || sum > 2.01 {
		t.Errorf("the fan's parallelism is %v; its two branches ran at once", sum)
	}

	ask := ""
	for _, a := range r.Asks {
		if a.State == "pending" {
			ask = a.AskID
		}
	}
	if res := c.plane.ctl(t, "", "--as", "alice", "approve", ask); res.code != 0 {
		t.Fatalf("approve %s: %s", ask, res.stderr)
	}
	c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })
	e = scrape(t, admin)
	for _, name := range series {
		if e.families[name] == nil {
			t.Errorf("%s is not in the exposition", name)
		}
	}
	for _, w := range []struct {
		name, label, value string
		n                  float64
	}{
		{"tollgate_runs_ended_total", "outcome", "complete", 1},
		{"tollgate_runs", "state", "complete", 1},
		{"tollgate_runs", "state", "parked", 0},
		{"tollgate_asks", "state", "pending", 0},
		{"tollgate_asks", "state", "consumed", 1},
		{"tollgate_answers_total", "kind", "approve", 1},
		{"tollgate_asks_opened_total", "", "", 1},
		{"tollgate_ask_expiries_total", "", "", 0},
		{"tollgate_steps_in_doubt_total", "", "", 0},
		{"tollgate_dispatch_latency_seconds", "", "", 3},
		{"tollgate_step_duration_seconds", "outcome", "succeeded", 3},
	} {
		if got := e.value(w.name, w.label, w.value); got != w.n {
			t.Errorf("after: %s{%s=%q} = %v, want %v", w.name, w.label, w.value, got, w.n)
		}
	}

	// --pprof serves the profiles on the same listener.
	if code, body := get(t, admin, "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ with --pprof: %d %.200s", code, body)
	}
	if code, body := get(t, admin, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("goroutine profile: %d %.200s", code, body)
	}
}

// Without --pprof the admin listener serves health and metrics, and no
// profile.
func TestAdminListenerWithoutPProf(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	admin := adminAddr(t, p)
	if code, body := get(t, admin, "/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline"} {
		if code, _ := get(t, admin, path); code != http.StatusNotFound {
			t.Errorf("%s without --pprof: %d, want 404", path, code)
		}
	}
	e := scrape(t, admin)
	if e.value("tollgate_runs", "state", "parked") != 0 || e.value("tollgate_runs_started_total", "", "") != 0 {
		t.Fatalf("a new plane has no runs:\n%s", e.text)
	}
}
