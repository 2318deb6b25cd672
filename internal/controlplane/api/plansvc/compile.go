package plansvc

import (
	"context"
	"fmt"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// Compile compiles a recipe or SKILL.md. A recipe that does not compile is
// an answer, not an RPC error: the response holds the diagnostics and no
// plan. Only a malformed request is INVALID_ARGUMENT.
func (s *Service) Compile(ctx context.Context, req *tollgatev1.CompileRequest) (*tollgatev1.CompileResponse, error) {
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
