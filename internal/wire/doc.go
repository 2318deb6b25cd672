// Package wire converts between the API's protos (gen/tollgate/v1) and the
// domain types of pkg/: the edge where protos become domain values, so
// pkg/ never imports gen/ or gRPC (DESIGN.md §11). One file per domain
// type, each function named for the type and direction (GrantToProto,
// GrantFromProto).
//
// It enforces no invariant itself; a conversion must carry every field a
// verifier checks, or a grant that crossed the wire would stop verifying
// (I1, I2 — the round-trip test holds it to that).
package wire
