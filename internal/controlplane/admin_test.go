package controlplane

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
)

func adminGet(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminMuxServesPProfOnlyWhenAsked(t *testing.T) {
	met := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "# metrics\n") })
	off := AdminMux(AdminConfig{Metrics: met})
	on := AdminMux(AdminConfig{Metrics: met, PProf: true})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/trace", "/debug/pprof/profile"} {
		if code, _ := adminGet(t, off, path); code != http.StatusNotFound {
			t.Errorf("%s without pprof: %d, want 404", path, code)
		}
		if strings.HasSuffix(path, "/trace") || strings.HasSuffix(path, "/profile") {
			continue // they record for a second at least
		}
		if code, body := adminGet(t, on, path); code != http.StatusOK {
			t.Errorf("%s with pprof: %d %.200s", path, code, body)
		}
	}
	if code, body := adminGet(t, on, "/debug/pprof/"); !strings.Contains(body, "goroutine") {
		t.Errorf("the pprof index lists the profiles: %d %.300s", code, body)
	}
	if code, body := adminGet(t, off, "/metrics"); code != http.StatusOK || body != "# metrics\n" {
		t.Errorf("/metrics: %d %q", code, body)
	}
	if code, body := adminGet(t, off, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, _ := adminGet(t, AdminMux(AdminConfig{}), "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics without metrics: %d, want 404", code)
	}
}

func TestPProfNeedsTheAdminListener(t *testing.T) {
	var stderr bytes.Buffer
	err := Run(context.Background(), []string{"--dev", "--pprof"}, MainConfig{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "--admin-listen") {
		t.Fatalf("--pprof alone: %v", err)
	}
}

// The metrics observer on a real Runner: the commits of a run that parks
// and is approved are counted, and the gauges read the store's counts.
func TestMetricsObserveTheRunner(t *testing.T) {
	st := memstore.New(memstore.Config{})
	met, err := metrics.New(metrics.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer met.Shutdown(context.Background())
	e := newEnvOn(t, st, devPolicy(t), echoTools(), func(c *Config) { c.Observers = []runner.Observer{met} })
	value := func(name, label, value string) float64 {
		t.Helper()
		fams, err := met.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if label == "" || hasLabel(m, label, value) {
					if h := m.GetHistogram(); h != nil {
						return float64(h.GetSampleCount())
					}
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no %s{%s=%q}", name, label, value)
		return 0
	}
	r := e.start("alice", "graph-ask-demo")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("want parked, got %v", r.GetState())
	}
	if n := value("tollgate_runs", "state", "parked"); n != 1 {
		t.Errorf("parked runs: %v", n)
	}
	if n := value("tollgate_asks", "state", "pending"); n != 1 {
		t.Errorf("pending asks: %v", n)
	}
	// cpu, mem (the fan) and brief were leased and finished.
	if n := value("tollgate_dispatch_latency_seconds", "", ""); n != 3 {
		t.Errorf("dispatches measured: %v, want 3", n)
	}
	if n := value("tollgate_fan_parallelism", "", ""); n != 1 {
		t.Errorf("fans finished: %v, want 1", n)
	}
	if _, err := e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: r.GetId() + "/ask_1",
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: "1"}}}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if r = e.get("alice", r.GetId()); r.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("want complete, got %v", r.GetState())
	}
	for _, w := range []struct {
		name, label, value string
		n                  float64
	}{
		{"tollgate_runs_started_total", "", "", 1},
		{"tollgate_runs_ended_total", "outcome", "complete", 1},
		{"tollgate_answers_total", "kind", "approve", 1},
		{"tollgate_runs", "state", "parked", 0},
		{"tollgate_runs", "state", "complete", 1},
		{"tollgate_asks", "state", "consumed", 1},
		{"tollgate_step_duration_seconds", "outcome", "succeeded", 4},
	} {
		if got := value(w.name, w.label, w.value); got != w.n {
			t.Errorf("%s{%s=%q} = %v, want %v", w.name, w.label, w.value, got, w.n)
		}
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
