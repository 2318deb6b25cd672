package compiler

// Stricter is the stricter of two views of one tool's annotations (a
// catalog's and an executor's, or two executors'): read-only only if both
// say so, idempotent only if both do, destructive and open-world unless
// both say not. Server and Name are a's. The input schema is b's when b
// has one, else a's: b is the later or the executor's view, and what an
// executor's server advertises is what it will check the call against.
func Stricter(a, b ToolInfo) ToolInfo {
	out := a
	if b.InputSchema != nil {
		out.InputSchema = b.InputSchema
	}
	out.ReadOnly = a.ReadOnly && b.ReadOnly
	out.Idempotent = a.Idempotent && b.Idempotent
	out.Destructive = unlessBothFalse(a.Destructive, b.Destructive)
	out.OpenWorld = unlessBothFalse(a.OpenWorld, b.OpenWorld)
	return out
}

// unlessBothFalse is false only when both hints are set to false (unset
// is the MCP default, true); otherwise nil, which reads as true.
func unlessBothFalse(a, b *bool) *bool {
	if a != nil && b != nil && !*a && !*b {
		f := false
		return &f
	}
	return nil
}

// Effect says in words what running the tool does as far as gates and
// retries care: "read-only", "side-effecting" or "side-effecting,
// idempotent". Two views of a tool disagree when their Effects differ.
func (t ToolInfo) Effect() string {
	switch {
	case t.ReadOnly:
		return "read-only"
	case t.Idempotent:
		return "side-effecting, idempotent"
	default:
		return "side-effecting"
	}
}

// WithStricter returns c with each of its tools replaced by the stricter
// of c's view and the view in views of the same tool (see Stricter). A
// tool that only views knows is not added: the catalog still says which
// tools a recipe may call.
func (c *Catalog) WithStricter(views []ToolInfo) *Catalog {
	var tools []ToolInfo
	if c != nil {
		for _, byName := range c.servers {
			for _, t := range byName {
				tools = append(tools, t)
			}
		}
	}
	out := NewCatalog(tools)
	for _, v := range views {
		if t, ok := out.servers[v.Server][v.Name]; ok {
			out.servers[v.Server][v.Name] = Stricter(t, v)
		}
	}
	return out
}
