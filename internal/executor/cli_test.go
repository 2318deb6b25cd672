package executor

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The example config in the repository stays valid.
func TestExampleConfigParses(t *testing.T) {
	b, err := os.ReadFile("../../examples/executor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fc FileConfig
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		t.Fatal(err)
	}
	if fc.ID == "" || fc.ControlPlane == "" || len(fc.MCPServers) == 0 || fc.GrantKeys["grant"] == "" {
		t.Fatalf("%+v", fc)
	}
}
