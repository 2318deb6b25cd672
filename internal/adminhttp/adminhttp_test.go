package adminhttp

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The listener serves its handler, and Close leaves no goroutine behind;
// a port already taken is an error that names it.
func TestStartServeClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, err := Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + l.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("served %q", b)
	}
	if _, err := Start(l.Addr(), http.NotFoundHandler(), 0); err == nil || !strings.Contains(err.Error(), l.Addr()) {
		t.Fatalf("a second listener on %s: %v", l.Addr(), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-l.Failed():
		if open {
			t.Fatal("Failed delivered an error after a clean Close")
		}
	default:
		t.Fatal("Failed is not closed after Close")
	}
}
