package executor

import (
	"fmt"
	"net/http"
)

// AdminMux is the executor's admin handler (--admin-listen), for an
// orchestrator's probes: GET /healthz answers 200 "ok" while the process
// serves (liveness); GET /readyz answers 200 "ok" while st says the
// executor has a welcomed stream to a control plane and is not leaving,
// else 503 with the one-line reason (st.Ready). The process never serves
// http.DefaultServeMux.
func AdminMux(st *Status) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := st.Ready()
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
