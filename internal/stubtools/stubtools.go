package stubtools

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// Config says which tools the host offers and who hears of calls.
type Config struct {
	// Catalog's tools are offered with their annotations, plus test.sleep
	// (read-only; {"ms": N} sleeps N milliseconds or until cancelled).
	Catalog *compiler.Catalog
	// OnCall, if set, is called as each call begins, before the tool does
	// anything, with the step's idempotency key (RUN/STEP).
	OnCall func(server, tool, key string)
}

// Host answers every call at once with {"tool", "args", "key"} (and, for
// erp.get_vendor, a vendor's bank_account and status), except test.sleep,
// which sleeps first.
type Host struct {
	cfg   Config
	specs []executor.ToolSpec

	mu    sync.Mutex
	calls map[string]int // server.tool → calls
}

// New builds the host.
func New(cfg Config) *Host {
	h := &Host{cfg: cfg, calls: map[string]int{}}
	if c := cfg.Catalog; c != nil {
		for _, s := range c.Servers() {
			for _, n := range c.Tools(s) {
				info, _ := c.Lookup(s, n)
				h.specs = append(h.specs, executor.ToolSpec{Server: s, Name: n, ReadOnly: info.ReadOnly, Idempotent: info.Idempotent})
			}
		}
	}
	h.specs = append(h.specs, executor.ToolSpec{Server: "test", Name: "sleep", ReadOnly: true})
	return h
}

// Tools implements executor.Host.
func (h *Host) Tools() []executor.ToolSpec { return h.specs }

// Call implements executor.Host.
func (h *Host) Call(ctx context.Context, server, tool string, args json.RawMessage, key string) (json.RawMessage, error) {
	if h.cfg.OnCall != nil {
		h.cfg.OnCall(server, tool, key)
	}
	h.mu.Lock()
	h.calls[server+"."+tool]++
	h.mu.Unlock()
	if server == "test" && tool == "sleep" {
		var a struct{ MS int }
		_ = json.Unmarshal(args, &a)
		t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, &executor.TransportError{Message: "cancelled"}
		}
		return json.RawMessage(`{"slept_ms":` + strconv.Itoa(a.MS) + `}`), nil
	}
	out := map[string]any{"tool": server + "." + tool, "args": args, "key": key}
	if server == "erp" && tool == "get_vendor" {
		// What vendor-payment's pay reads: its input schema wants a
		// string bank_account, so a run is not refused before its ask.
		out["bank_account"], out["status"] = "XXXX2048", "active"
	}
	return json.Marshal(out)
}

// Count is how many calls server.tool (e.g. "notes.store") has had.
func (h *Host) Count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[name]
}
