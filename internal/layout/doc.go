// Package layout holds no code, only a test: the dependency rules of
// DESIGN.md §11, checked on every `go test ./...` over the source tree
// (imports parsed with go/parser; no go command, no network):
//
//   - a pkg/ package never reaches internal/, gen/, gRPC or go-redis, not
//     even through another of our packages (pkg/ stays pure);
//   - the three binaries' packages — internal/controlplane,
//     internal/executor, internal/approvectl, and the packages under them
//     — never import each other, not even through another package, and
//     cmd/X links only its own. Tests may link more; internal/devstack,
//     which runs an in-process executor for cmd/controlplane's dev mode,
//     is the one package that links two, and only cmd/controlplane may
//     import it;
//   - gen/ imports nothing of ours.
//
// It enforces no invariant of §1 itself; it keeps the places that do
// where §11 says they are.
package layout
