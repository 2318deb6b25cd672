// Package skills is the registry of saved skills: the one path by which a
// skill is published (through the API, or loaded from a --skills-dir) and
// the one place a run or a schedule finds the source it runs.
//
// Invariants it enforces, and where:
//   - A version is stored only if it compiles with the one compiler
//     against the live catalog and every gate of it could be decided by
//     someone under the policy in force (Registry.Put): a refusal carries
//     line:col diagnostics, never a stored skill that fails at its first
//     run.
//   - Who may publish, change or delete a skill is policy (`skill.NAME`,
//     approvals.Desk.MayPublishSkill), judged when the request is made; a
//     --skills-dir is the operator's, so its loads are not judged.
//   - History is append-only (store.Skills): a delete is a tombstone, a
//     version is never rewritten, and a run records the name, version and
//     plan digest it ran (engine.Origin).
//   - Publishing the source the latest version holds stores nothing, so
//     every replica loading the same directory converges on one version.
package skills
