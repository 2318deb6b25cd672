package controlplane

import (
	"fmt"
	"net/http"
	"net/http/pprof"
)

// AdminConfig is what the admin listener serves besides /healthz.
type AdminConfig struct {
	// Metrics, when set, serves /metrics (the Prometheus text format).
	Metrics http.Handler
	// PProf serves net/http/pprof under /debug/pprof/: profiles of a
	// live process, for operators. Off by default, since a profile
	// costs CPU and shows what the process is doing to whoever can reach
	// the port.
	PProf bool
	// Ready, when set, serves /readyz: 200 while it returns nil, else 503
	// with its reason (the gRPC health status, for probes that cannot
	// speak gRPC over TLS).
	Ready func() error
}

// AdminMux is the admin listener's handler: /healthz (alive: 200 as long
// as the process serves HTTP), /readyz, /metrics and pprof as configured. The pprof handlers are
// registered on it explicitly; the process never serves
// http.DefaultServeMux (where importing net/http/pprof also puts them).
func AdminMux(cfg AdminConfig) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if cfg.Ready != nil {
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			if err := cfg.Ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
	}
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	if cfg.PProf {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // the named profiles too: heap, goroutine, block…
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
