package controlplane

import (
	"io/fs"

	"github.com/tollgate-dev/tollgate/examples"
)

// ExampleSkills is the example skills built into the binary
// (examples/skills), as the directory --dev loads into the registry.
func ExampleSkills() fs.FS {
	sub, err := fs.Sub(examples.Skills, "skills")
	if err != nil {
		panic(err) // "skills" is a valid path: fs.Sub fails only on an invalid one
	}
	return sub
}
