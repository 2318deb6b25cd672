package controlplane

import (
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// Any caller may compile against a catalog of its own, input schemas and
// all. A schema whose $ref reaches itself made the validator recurse until
// the goroutine stack overflowed, which kills the control plane; such a
// schema now checks nothing (toolschema.Parse refuses it), and the server
// answers.
func TestCompileAgainstASelfReferencingSchemaDoesNotCrash(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	cat := &tollgatev1.ToolCatalog{Tools: []*tollgatev1.CatalogTool{{Tool: &tollgatev1.Tool{Server: "notes", Tool: "store",
		Annotations:     &tollgatev1.ToolAnnotations{ReadOnlyHint: true},
		InputSchemaJson: `{"type":"object","properties":{"text":{"$ref":"#/properties/text"}}}`}}}}
	resp, err := tollgatev1.NewPlanServiceClient(e.conn("alice")).Compile(bg, &tollgatev1.CompileRequest{Source: "s: notes.store {\"text\": \"x\"}\n", Catalog: cat})
	if err != nil || resp.GetPlanDigest() == "" {
		t.Fatalf("compile: %v %v", resp.GetDiagnostics(), err)
	}
}
