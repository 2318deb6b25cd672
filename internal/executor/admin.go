package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
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

// admin is a running admin listener; Close stops it and waits for its
// goroutine.
type admin struct {
	srv  *http.Server
	addr string
	done chan error // the Serve goroutine's error, then closed
}

// startAdmin listens on addr (HOST:PORT; port 0 picks one) and serves h
// on a goroutine of its own until Close.
func startAdmin(addr string, h http.Handler) (*admin, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w (set --admin-listen to a free HOST:PORT, or leave it empty for none)", addr, err)
	}
	a := &admin{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}, addr: lis.Addr().String(), done: make(chan error, 1)}
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			a.done <- fmt.Errorf("admin listener %s: %w", a.addr, err)
		}
	}()
	return a, nil
}

// Close shuts the listener down (a probe in progress gets up to a second
// to finish) and returns once its goroutine has, with the error it served
// with, if any.
func (a *admin) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
	}
	return <-a.done
}
