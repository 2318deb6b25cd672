package examples

import "embed"

// Catalog is examples/catalog.yaml: the tools the example skills use, with
// the MCP annotations executors advertise.
//
//go:embed catalog.yaml
var Catalog []byte

// Skills holds examples/skills/*/SKILL.md.
//
//go:embed skills
var Skills embed.FS

// Policy is examples/policy.csv: the dev policy (pkg/authz) --dev starts
// with when none is given.
//
//go:embed policy.csv
var Policy []byte
