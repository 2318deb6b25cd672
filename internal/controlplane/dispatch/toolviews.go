package dispatch

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/toolschema"
)

// toolViews reconciles the configured tool catalog with what executors
// advertise for the same tools (I2): the stricter view wins
// (compiler.Stricter), and every disagreement with the catalog is logged
// as a warning naming both views. An advertised input schema replaces the
// catalog's (it is what the tool's server checks calls against). What executors said is kept for the life
// of the process, so a tool once advertised as side-effecting stays so
// even after that executor disconnects: a view never relaxes while the
// control plane runs.
type toolViews struct {
	log  *slog.Logger
	base *compiler.Catalog

	mu    sync.Mutex
	heard map[string]heardTool // "server.tool"
	// descs are the tools' descriptions as an executor first gave them
	// (informational: what the MCP gateway lists to agents).
	descs  map[string]string
	merged *compiler.Catalog // base with heard applied; a new pointer only when it changes
}

// heardTool is the strictest view of a tool executors have advertised,
// and the executor that first advertised it so.
type heardTool struct {
	info     compiler.ToolInfo
	executor string
}

func newToolViews(base *compiler.Catalog, log *slog.Logger) *toolViews {
	return &toolViews{log: log, base: base, heard: map[string]heardTool{}, descs: map[string]string{}, merged: base}
}

// catalog is the catalog recipes compile against: the configured one,
// each tool made as strict as any executor has advertised it.
func (v *toolViews) catalog() *compiler.Catalog {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.merged
}

// sideEffecting reports whether some executor has advertised server.tool
// as side-effecting (readOnlyHint not true), and which one.
func (v *toolViews) sideEffecting(server, tool string) (executor string, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h, ok := v.heard[server+"."+tool]
	if !ok || h.info.ReadOnly {
		return "", false
	}
	return h.executor, true
}

// advertised records the tools an executor's hello lists.
func (v *toolViews) advertised(executor string, tools []*tollgatev1.Tool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	changed := false
	for _, t := range tools {
		a := t.GetAnnotations()
		info := compiler.ToolInfo{Server: t.GetServer(), Name: t.GetTool(), ReadOnly: a.GetReadOnlyHint(), Idempotent: a.GetIdempotentHint(),
			Destructive: a.DestructiveHint, OpenWorld: a.OpenWorldHint}
		key := info.Server + "." + info.Name
		if d := t.GetDescription(); d != "" && v.descs[key] == "" {
			v.descs[key] = d
		}
		if js := t.GetInputSchemaJson(); js != "" {
			schema, err := toolschema.Parse([]byte(js))
			if err != nil {
				// Its server still checks its own input; only the early
				// refusal is lost.
				v.log.Warn("an executor advertised an input schema that does not parse; args for the tool are not checked against it", "tool", key, "executor", executor, "error", err)
			}
			info.InputSchema = schema
		}
		if c, ok := v.base.Lookup(info.Server, info.Name); ok && c.Effect() != info.Effect() {
			v.log.Warn("the tool catalog and an executor disagree about a tool; the stricter view wins",
				"tool", key, "catalog_says", c.Effect(), "executor", executor, "executor_says", info.Effect(),
				"using", compiler.Stricter(c, info).Effect())
		}
		prev, ok := v.heard[key]
		if !ok {
			v.heard[key] = heardTool{info: info, executor: executor}
			changed = true
			continue
		}
		if s := compiler.Stricter(prev.info, info); s.Effect() != prev.info.Effect() || s.InputSchema.JSON() != prev.info.InputSchema.JSON() {
			v.heard[key] = heardTool{info: s, executor: executor}
			changed = true
		}
	}
	if !changed {
		return
	}
	v.remerge()
}

// remerge is base with what executors said applied; v.mu is held. The
// merged catalog is a new pointer only when a view changed.
func (v *toolViews) remerge() bool {
	views := make([]compiler.ToolInfo, 0, len(v.heard))
	for _, h := range v.heard {
		views = append(views, h.info)
	}
	next := v.base.WithStricter(views)
	if sameViews(v.merged, next) {
		return false
	}
	v.merged = next
	return true
}

// rebase puts a reloaded catalog in the configured one's place; what
// executors advertised still makes it stricter. It reports whether the
// catalog recipes compile against changed.
func (v *toolViews) rebase(base *compiler.Catalog) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.base = base
	return v.remerge()
}

// catalogSideEffecting reports whether the configured catalog (as
// reloaded) calls server.tool side-effecting.
func (v *toolViews) catalogSideEffecting(server, tool string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.base.Lookup(server, tool)
	return ok && !c.ReadOnly
}

// sameViews reports whether two catalogs list the same tools with the
// same Effect and input schema (so recipes compile the same against
// either, and runs check args the same).
func sameViews(a, b *compiler.Catalog) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, s := range b.Servers() {
		for _, n := range b.Tools(s) {
			x, ok := a.Lookup(s, n)
			y, _ := b.Lookup(s, n)
			if !ok || x.Effect() != y.Effect() || x.InputSchema.JSON() != y.InputSchema.JSON() {
				return false
			}
		}
	}
	return len(a.Servers()) == len(b.Servers())
}

// Catalog is the catalog recipes compile against: the configured one,
// each tool as strict as any executor has advertised it (toolViews).
func (d *Dispatcher) Catalog() *compiler.Catalog { return d.views.catalog() }

// SetCatalog puts a reloaded configured catalog in place (executors'
// views still apply on top). A step whose plan took a tool as read-only
// that the new catalog calls side-effecting is refused, not leased
// without a grant (refuseUngoverned).
func (d *Dispatcher) SetCatalog(c *compiler.Catalog) bool { return d.views.rebase(c) }

// refuseUngoverned keeps a tool step that its plan took as read-only from
// every executor once some executor has advertised the tool as
// side-effecting: the plan was compiled under the laxer view, so no
// approval governs the step and its lease would go out without a grant
// (I1, I2). The step fails with the reason instead; it reports whether it
// did. d.mu is held: the failure is recorded on a record worker.
func (d *Dispatcher) refuseUngoverned(o offer) bool {
	if o.d.Kind != plan.KindTool || o.d.SideEffect {
		return false
	}
	tool := o.d.Server + "." + o.d.Tool
	var who, says string
	switch executor, ok := d.views.sideEffecting(o.d.Server, o.d.Tool); {
	case d.views.catalogSideEffecting(o.d.Server, o.d.Tool):
		// The catalog was reloaded since the plan was compiled (or
		// another replica compiled it against an older one).
		says = "the control plane's tool catalog, reloaded since,"
	case ok:
		who, says = executor, "executor "+executor
	default:
		return false
	}
	why := fmt.Sprintf("not run: %s says %s is side-effecting, but this run's plan was compiled while the control plane's catalog called it read-only, "+
		"so no approval governs the step and it would run without a grant; start the run again: %s now compiles behind an approval", says, tool, tool)
	d.cfg.Log.Warn("refused to lease a side effect the plan took as read-only", "run", o.runID, "step", o.d.Step, "tool", tool,
		"plan_says", "read-only", "executor", who, "now_says", "side-effecting", "by", says)
	d.refuseStep(o, why)
	return true
}

// Offer is a tool the executors connected to this replica offer, in the
// view recipes compile against (the catalog made as strict as any
// executor advertised it), with the description an executor gave.
type Offer struct {
	compiler.ToolInfo
	Description string
}

// Offered lists the tools the executors connected here offer (Connected),
// sorted by server and tool: what the MCP gateway may list to agents.
func (d *Dispatcher) Offered() []Offer {
	cat := d.views.catalog()
	seen := map[string]bool{}
	var out []Offer
	for _, e := range d.Connected() {
		for _, key := range e.Tools {
			if seen[key] {
				continue
			}
			seen[key] = true
			server, tool, _ := strings.Cut(key, ".")
			info, ok := cat.Lookup(server, tool)
			if !ok {
				continue // advertised but not yet merged: listed on the next call
			}
			d.views.mu.Lock()
			desc := d.views.descs[key]
			d.views.mu.Unlock()
			out = append(out, Offer{ToolInfo: info, Description: desc})
		}
	}
	slices.SortFunc(out, func(a, b Offer) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Name, b.Name))
	})
	return out
}
