// Package layout holds no code, only a test: the dependency rules of
// DESIGN.md §11, checked on every `go test ./...` over the source tree
// (imports parsed with go/parser; no go command, no network):
//
//   - a pkg/ package never reaches internal/, gen/, gRPC or go-redis, not
//     even through another of our packages (pkg/ stays pure);
//   - the three binaries' packages — internal/controlplane,
//     internal/executor, internal/approvectl — never import each other,
//     and cmd/X links only its own (tests may link more);
//   - gen/ imports nothing of ours.
//
// It enforces no invariant of §1 itself; it keeps the places that do
// where §11 says they are.
package layout
