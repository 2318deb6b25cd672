package skillsvc

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/skills"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// Config is what the SkillService needs.
type Config struct {
	Registry *skills.Registry
	Catalog  func() *compiler.Catalog
}

// Service implements tollgatev1.SkillServiceServer.
type Service struct {
	tollgatev1.UnimplementedSkillServiceServer
	cfg Config
}

var _ tollgatev1.SkillServiceServer = (*Service)(nil)

// New returns the SkillService.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterSkillServiceServer(gs, s) }

// PutSkill publishes a version; a source that is refused is an answer
// (saved = false and the diagnostics), not an error.
func (s *Service) PutSkill(ctx context.Context, req *tollgatev1.PutSkillRequest) (*tollgatev1.PutSkillResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetExpectedVersion() < -1 {
		return nil, fmt.Errorf("expected_version %d: want -1, 0 or a version: %w", req.GetExpectedVersion(), errkind.Invalid)
	}
	res, err := s.cfg.Registry.Put(ctx, skills.PutRequest{Who: who, Name: req.GetName(), Source: req.GetSource(), Expect: req.GetExpectedVersion(), Origin: skills.OriginAPI})
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.PutSkillResponse{Saved: res.Saved, Unchanged: res.Unchanged, Diagnostics: wire.Diagnostics(res.Diagnostics)}
	if res.Compiled.Plan != nil {
		out.PlanDigest = res.Compiled.Digest
		out.PlanCard = compiler.Card(res.Compiled.Plan, res.Compiled.Digest, res.Compiled.Diagnostics)
	}
	if res.Saved {
		out.Skill = wire.Skill(res.Version)
	}
	return out, nil
}

// GetSkill returns a version with the plan it compiles to now.
func (s *Service) GetSkill(ctx context.Context, req *tollgatev1.GetSkillRequest) (*tollgatev1.GetSkillResponse, error) {
	if _, err := api.Caller(ctx); err != nil {
		return nil, err
	}
	if req.GetVersion() < 0 {
		return nil, fmt.Errorf("version %d: want 0 (the latest) or a version: %w", req.GetVersion(), errkind.Invalid)
	}
	v, err := s.cfg.Registry.Get(ctx, req.GetName(), req.GetVersion())
	if err != nil {
		return nil, err
	}
	latest := v.Version
	if req.GetVersion() > 0 {
		if l, err := s.cfg.Registry.Latest(ctx, v.Name); err == nil {
			latest = l.Version
		}
	}
	res := compiler.Compile(v.Source, compiler.Options{Catalog: s.cfg.Catalog(), Name: v.Name})
	out := &tollgatev1.GetSkillResponse{Skill: wire.Skill(v), Diagnostics: wire.Diagnostics(res.Diagnostics), LatestVersion: latest}
	if res.Plan != nil {
		out.Plan = wire.Plan(res.Plan, res.Digest)
		out.PlanCard = compiler.Card(res.Plan, res.Digest, res.Diagnostics)
	}
	return out, nil
}

// ListSkills lists the skills that exist.
func (s *Service) ListSkills(ctx context.Context, req *tollgatev1.ListSkillsRequest) (*tollgatev1.ListSkillsResponse, error) {
	if _, err := api.Caller(ctx); err != nil {
		return nil, err
	}
	vs, next, err := s.cfg.Registry.List(ctx, req.GetPageToken(), int(req.GetPageSize()))
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListSkillsResponse{NextPageToken: next}
	for _, v := range vs {
		out.Skills = append(out.Skills, wire.Skill(v))
	}
	return out, nil
}

// SkillHistory lists every version of a skill, oldest first.
func (s *Service) SkillHistory(ctx context.Context, req *tollgatev1.SkillHistoryRequest) (*tollgatev1.SkillHistoryResponse, error) {
	if _, err := api.Caller(ctx); err != nil {
		return nil, err
	}
	var after int64
	if t := req.GetPageToken(); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("page_token %q is not one this service gave: %w", t, errkind.Invalid)
		}
		after = n
	}
	// One more than the page, to know whether another follows: within
	// the store's own bound.
	limit := min(store.Limit(int(req.GetPageSize())), store.Limit(1<<30)-1)
	vs, err := s.cfg.Registry.History(ctx, req.GetName(), after, limit+1)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.SkillHistoryResponse{}
	if len(vs) > limit {
		vs = vs[:limit]
		out.NextPageToken = strconv.FormatInt(vs[limit-1].Version, 10)
	}
	for _, v := range vs {
		out.Versions = append(out.Versions, wire.Skill(v))
	}
	return out, nil
}

// DeleteSkill removes a skill; its history stays.
func (s *Service) DeleteSkill(ctx context.Context, req *tollgatev1.DeleteSkillRequest) (*tollgatev1.DeleteSkillResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	v, err := s.cfg.Registry.Delete(ctx, who, req.GetName(), req.GetExpectedVersion(), skills.OriginAPI)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.DeleteSkillResponse{Tombstone: wire.Skill(v)}, nil
}
