// Package controlplane holds the control plane's gRPC handlers and their
// wiring. Handlers convert protos to domain types at the edge and call the
// pure cores (pkg/compiler, pkg/plan, pkg/engine).
package controlplane

import (
	"context"
	"fmt"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// PlanConfig configures the PlanService.
type PlanConfig struct {
	// Catalog is the server's tool catalog: the union of what connected
	// executors advertise and any catalog files. Compile uses it unless a
	// request brings its own.
	Catalog func() *compiler.Catalog
}

// PlanServer implements tollgatev1.PlanServiceServer. Skills (List, Get,
// Put) need the store and answer Unimplemented until it exists.
type PlanServer struct {
	tollgatev1.UnimplementedPlanServiceServer
	cfg PlanConfig
}

// NewPlanServer returns a PlanService handler.
func NewPlanServer(cfg PlanConfig) *PlanServer { return &PlanServer{cfg: cfg} }

// Compile compiles a recipe or SKILL.md. A recipe that does not compile is
// an answer, not an RPC error: the response holds the diagnostics and no
// plan. Only a malformed request is INVALID_ARGUMENT.
func (s *PlanServer) Compile(ctx context.Context, req *tollgatev1.CompileRequest) (*tollgatev1.CompileResponse, error) {
	if req.GetSource() == "" {
		return nil, fmt.Errorf("compile: source is empty: %w", errkind.Invalid)
	}
	if len(req.GetSource()) > compiler.MaxSourceBytes {
		return nil, fmt.Errorf("compile: source is %d bytes, the limit is %d: %w", len(req.GetSource()), compiler.MaxSourceBytes, errkind.Invalid)
	}
	cat := wire.CatalogFromProto(req.GetCatalog())
	if req.GetCatalog() == nil && s.cfg.Catalog != nil {
		cat = s.cfg.Catalog()
	}
	name := req.GetName()
	if name == "" {
		name = "recipe"
	}
	res := compiler.Compile(req.GetSource(), compiler.Options{Catalog: cat, Name: name})
	out := &tollgatev1.CompileResponse{Diagnostics: wire.Diagnostics(res.Diagnostics)}
	if res.Plan != nil {
		out.Plan = wire.Plan(res.Plan, res.Digest)
		out.PlanDigest = res.Digest
		out.PlanCard = compiler.Card(res.Plan, res.Digest, res.Diagnostics)
	}
	return out, nil
}
