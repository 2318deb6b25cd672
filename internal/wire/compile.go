package wire

import (
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/toolschema"
)

// Diagnostics is the compiler's diagnostics as the API shows them.
func Diagnostics(ds compiler.Diagnostics) []*tollgatev1.Diagnostic {
	out := make([]*tollgatev1.Diagnostic, 0, len(ds))
	for _, d := range ds {
		sev := tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_WARNING
		if d.Severity == compiler.Error {
			sev = tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR
		}
		out = append(out, &tollgatev1.Diagnostic{Line: int32(d.Pos.Line), Column: int32(d.Pos.Col), Severity: sev, Code: d.Code, Message: d.Message})
	}
	return out
}

// CatalogFromProto builds a compiler catalog from a request's; the catalog
// policy's read_only and idempotent overrides win over the MCP hints.
func CatalogFromProto(c *tollgatev1.ToolCatalog) *compiler.Catalog {
	var tools []compiler.ToolInfo
	for _, ct := range c.GetTools() {
		t := ct.GetTool()
		a := t.GetAnnotations()
		info := compiler.ToolInfo{Server: t.GetServer(), Name: t.GetTool(), ReadOnly: a.GetReadOnlyHint(),
			Idempotent: a.GetIdempotentHint(), Destructive: a.DestructiveHint, OpenWorld: a.OpenWorldHint}
		if ct.ReadOnly != nil {
			info.ReadOnly = ct.GetReadOnly()
		}
		if ct.Idempotent != nil {
			info.Idempotent = ct.GetIdempotent()
		}
		// A schema that does not parse checks nothing (its server still
		// checks its own input).
		info.InputSchema, _ = toolschema.Parse([]byte(t.GetInputSchemaJson()))
		tools = append(tools, info)
	}
	return compiler.NewCatalog(tools)
}
