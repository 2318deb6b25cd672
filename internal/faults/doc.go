// Package faults is named crash points for chaos tests: places in the
// control plane and the executor where a test build can be made to die,
// stall or fail on purpose, so that a test can check what survives a
// process killed at exactly that moment (a commit made and its effects
// not yet dispatched, a side effect started and its result not yet sent).
//
// Contract:
//
//   - Test builds only. The points are compiled in only with the build tag
//     faults (go build -tags faults). Without it, At is a function that
//     returns nil, which the compiler inlines away at every call site:
//     no state, no environment read, no cost. Nothing else in this package
//     depends on the tag: Parse, the point names and ErrInjected are the
//     same in every build.
//   - Armed from the environment. With the tag, the variable
//     TOLLGATE_FAULTS (EnvVar) is read once, when the process starts (the
//     package's init), and parsed by Parse: point=action[@N], comma
//     separated, action kill, pause:DURATION or fail, firing on the Nth
//     hit of its point (default the first), once. A spec that does not
//     parse (a misspelled point, a bad action) makes the process write the
//     error to stderr and exit with status 2 at start: a test that arms a
//     point must never run unarmed by mistake. Unset or empty, nothing is
//     armed and every point returns nil.
//   - What a point does when it fires: it first writes one line to stderr,
//     "tollgate-faults: <point> <action>", then kill sends SIGKILL to its
//     own process (it never returns: no deferred call runs, no buffer is
//     flushed, as in a real crash); pause sleeps for its duration and
//     returns nil; fail returns an error wrapping ErrInjected, which the
//     caller handles the way it handles a real error at that place (each
//     point's comment in points.go says how). Where the caller has no error
//     to take, it ignores the result: kill and pause still work there.
//   - Hits are counted per point, atomically, from the start of the
//     process; only armed points are counted.
//
// The points, where each sits and what fail does there: points.go.
//
// Package-level state: the repository's rule is no package-level mutable
// state. This package is the documented exception, and only under the
// faults tag (faults_on.go): the armed set, built once at start, and its
// hit counters. A build without the tag has none (faults_off.go).
package faults
