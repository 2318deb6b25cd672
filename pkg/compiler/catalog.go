package compiler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/toolschema"
	"go.yaml.in/yaml/v3"
)

// ToolInfo is what the compiler needs to know of a tool: its MCP
// annotations and input schema as an executor advertises them.
type ToolInfo struct {
	Server      string
	Name        string
	ReadOnly    bool  // readOnlyHint; a tool is side-effecting unless this is true
	Idempotent  bool  // idempotentHint
	Destructive *bool // destructiveHint; nil means the MCP default (true)
	OpenWorld   *bool // openWorldHint; nil means the MCP default (true)
	// InputSchema is the tool's MCP inputSchema; nil when unknown (then
	// args are not checked).
	InputSchema *toolschema.Schema
}

// CheckArgs reports what in args (resolved, a JSON object) the tool's
// input schema refuses; nil when they fit or no schema is known.
func (t ToolInfo) CheckArgs(args []byte) toolschema.Problems {
	return t.InputSchema.Check(args, nil)
}

// SideEffect reports whether calling the tool changes the world.
func (t ToolInfo) SideEffect() bool { return !t.ReadOnly }

// Catalog is the set of tools a recipe may call: the union of what
// executors advertise, or a catalog file when compiling offline.
type Catalog struct {
	servers map[string]map[string]ToolInfo
}

// NewCatalog builds a catalog from tool descriptions.
func NewCatalog(tools []ToolInfo) *Catalog {
	c := &Catalog{servers: map[string]map[string]ToolInfo{}}
	for _, t := range tools {
		if c.servers[t.Server] == nil {
			c.servers[t.Server] = map[string]ToolInfo{}
		}
		c.servers[t.Server][t.Name] = t
	}
	return c
}

// Lookup finds SERVER.TOOL.
func (c *Catalog) Lookup(server, tool string) (ToolInfo, bool) {
	if c == nil {
		return ToolInfo{}, false
	}
	t, ok := c.servers[server][tool]
	return t, ok
}

// CheckArgs says why SERVER.TOOL's input schema refuses args (resolved,
// a JSON object) as toolschema.Problems, or nil: they fit, or the tool or
// its schema is unknown. It is the check a run makes before an ask opens.
func (c *Catalog) CheckArgs(server, tool string, args []byte) error {
	t, _ := c.Lookup(server, tool)
	if ps := t.CheckArgs(args); len(ps) > 0 {
		return ps
	}
	return nil
}

// Servers lists the server names in order.
func (c *Catalog) Servers() []string {
	var out []string
	for s := range c.servers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Tools lists a server's tool names in order.
func (c *Catalog) Tools(server string) []string {
	var out []string
	for t := range c.servers[server] {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

type catalogFile struct {
	Servers map[string][]struct {
		Name        string `yaml:"name"`
		Annotations struct {
			ReadOnlyHint    bool  `yaml:"readOnlyHint"`
			IdempotentHint  bool  `yaml:"idempotentHint"`
			DestructiveHint *bool `yaml:"destructiveHint"`
			OpenWorldHint   *bool `yaml:"openWorldHint"`
		} `yaml:"annotations"`
		InputSchema map[string]any `yaml:"inputSchema"`
	} `yaml:"servers"`
}

// ParseCatalog reads a catalog file (see examples/catalog.yaml): servers,
// each with a list of tools, their MCP annotations and (optionally) their
// MCP inputSchema, written as YAML.
func ParseCatalog(data []byte) (*Catalog, error) {
	var f catalogFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	var tools []ToolInfo
	for server, list := range f.Servers {
		for i, t := range list {
			if t.Name == "" {
				return nil, fmt.Errorf("parse catalog: server %q tool %d has no name", server, i+1)
			}
			var schema *toolschema.Schema
			if t.InputSchema != nil {
				js, err := json.Marshal(t.InputSchema)
				if err == nil {
					schema, err = toolschema.Parse(js)
				}
				if err != nil {
					return nil, fmt.Errorf("parse catalog: %s.%s: %w", server, t.Name, err)
				}
			}
			tools = append(tools, ToolInfo{
				Server: server, Name: t.Name,
				ReadOnly:    t.Annotations.ReadOnlyHint,
				Idempotent:  t.Annotations.IdempotentHint,
				Destructive: t.Annotations.DestructiveHint,
				OpenWorld:   t.Annotations.OpenWorldHint,
				InputSchema: schema,
			})
		}
	}
	return NewCatalog(tools), nil
}
