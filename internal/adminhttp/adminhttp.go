// Package adminhttp runs an HTTP listener owned by the process that starts
// it (Close stops it and waits for its goroutine): the admin listener —
// plain HTTP for probes, metrics and profiles, which the control plane and
// the executor both serve through it — and the control plane's web inbox
// (Serve, on a listener that may speak TLS).
package adminhttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Listener is a running admin listener.
type Listener struct {
	srv  *http.Server
	addr string
	done chan error // the Serve goroutine's error, if any, then closed
}

// Start listens on addr (HOST:PORT; port 0 picks one) and serves h on a
// goroutine of its own until Close. writeTimeout bounds a response (0:
// none, for a CPU profile that streams as long as it is asked to).
func Start(addr string, h http.Handler, writeTimeout time.Duration) (*Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w", addr, err)
	}
	return Serve(lis, h, writeTimeout), nil
}

// Serve serves h on lis (a TLS listener, say) as Start does.
func Serve(lis net.Listener, h http.Handler, writeTimeout time.Duration) *Listener {
	l := &Listener{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: writeTimeout, IdleTimeout: time.Minute}, addr: lis.Addr().String(), done: make(chan error, 1)}
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			l.done <- fmt.Errorf("listener %s: %w", l.addr, err)
		}
	}()
	return l
}

// ServeStreams serves h on lis as Serve does, for a handler whose
// responses are long-lived streams (the MCP gateway's calls wait for
// people): no read or write timeout, since net/http cancels a request's
// context once its connection's read deadline passes, with the response
// still streaming. Headers must still arrive within ReadHeaderTimeout.
func ServeStreams(lis net.Listener, h http.Handler) *Listener {
	l := &Listener{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
		addr: lis.Addr().String(), done: make(chan error, 1)}
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			l.done <- fmt.Errorf("listener %s: %w", l.addr, err)
		}
	}()
	return l
}

// Addr is the address it listens on.
func (l *Listener) Addr() string { return l.addr }

// Failed receives the error the listener stopped serving with, should it
// stop before Close.
func (l *Listener) Failed() <-chan error { return l.done }

// Close shuts the listener down (a request in progress gets up to a second
// to finish) and returns once its goroutine has, with the error it served
// with, if any.
func (l *Listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		_ = l.srv.Close()
	}
	return <-l.done
}
