package controlplane

import (
	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
)

// embeddedSkills serves the example skills built into the binary.
type embeddedSkills struct{}

// Skill implements Skills.
func (embeddedSkills) Skill(name string) (string, bool) {
	b, err := examples.Skills.ReadFile("skills/" + name + "/SKILL.md")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// ExampleSkills returns the skills built into the binary (examples/skills).
func ExampleSkills() runsvc.Skills { return embeddedSkills{} }
