// Package skillsvc serves tollgate.v1.SkillService: thin handlers over
// the skill registry (internal/controlplane/skills), which enforces what
// a published skill must be and who may publish it. The author of a
// version is always the authenticated caller.
package skillsvc
