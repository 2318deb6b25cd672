package compiler

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// Skill is a SKILL.md file: optional YAML front matter with name and
// description, and a body that is a recipe.
type Skill struct {
	Name        string
	Description string
	Body        string // the recipe, front matter removed
	BodyLine    int    // the file line the body starts on (1-based)
}

// splitSkill separates front matter from the body. A file without a first
// line of "---" is all body.
func splitSkill(src string, d *diags) Skill {
	lines := strings.SplitAfter(src, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], "\r\n") != "---" {
		return Skill{Body: src, BodyLine: 1}
	}
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], "\r\n") != "---" {
			continue
		}
		var fm struct {
			Name        string `yaml:"name"`
			Description string `yaml:"description"`
		}
		if err := yaml.Unmarshal([]byte(strings.Join(lines[1:i], "")), &fm); err != nil {
			d.errorf(Pos{Line: 2, Col: 1}, CodeFrontMatter, "the front matter is not valid YAML: %v", err)
		}
		return Skill{Name: fm.Name, Description: fm.Description, Body: strings.Join(lines[i+1:], ""), BodyLine: i + 2}
	}
	d.errorf(Pos{Line: 1, Col: 1}, CodeFrontMatter, "the front matter opened with --- is never closed with a line of ---")
	return Skill{Body: "", BodyLine: len(lines) + 1}
}
