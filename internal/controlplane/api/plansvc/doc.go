// Package plansvc serves tollgate.v1.PlanService: compiling a recipe or
// a SKILL.md into a plan and its card, before anything runs. A recipe that
// does not compile is an answer (its diagnostics), not an error.
//
// It enforces no invariant of its own: the gates a plan carries are the
// compiler's (I1), and nothing runs here.
package plansvc
