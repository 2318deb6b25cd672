//go:build tools

// Package tools pins the build-time tools (buf and the protoc plugins) so that
// `make generate` uses exactly these versions. Nothing here is linked into a
// Tollgate binary.
package tools

import (
	_ "github.com/bufbuild/buf/cmd/buf"
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
