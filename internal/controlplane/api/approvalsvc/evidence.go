package approvalsvc

import (
	"context"
	"fmt"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// maxEvidence bounds what one AttachEvidence may carry.
const (
	maxArtifacts     = 10
	maxArtifactBytes = 1 << 20
)

// AttachEvidence adds the requester's artifacts to an ask that asked for
// them; it is pending again with a new evidence digest.
func (s *Service) AttachEvidence(ctx context.Context, req *tollgatev1.AttachEvidenceRequest) (*tollgatev1.AttachEvidenceResponse, error) {
	who, run, a, err := s.callerAsk(ctx, req.GetAskId())
	if err != nil {
		return nil, err
	}
	if n := len(req.GetArtifacts()); n == 0 || n > maxArtifacts {
		return nil, fmt.Errorf("attach 1 to %d artifacts, not %d: %w", maxArtifacts, n, errkind.Invalid)
	}
	var arts []engine.Evidence
	for _, u := range req.GetArtifacts() {
		if u.GetName() == "" || len(u.GetContent()) > maxArtifactBytes {
			return nil, fmt.Errorf("artifact %q: a name and at most %d bytes: %w", u.GetName(), maxArtifactBytes, errkind.Invalid)
		}
		arts = append(arts, engine.Evidence{Name: u.GetName(), MediaType: u.GetMediaType(), Content: u.GetContent()})
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.AttachEvidence{Ask: a.ID, Actor: who, Artifacts: arts, Note: req.GetNote(), At: now}
	})
	if err != nil {
		return nil, err
	}
	return &tollgatev1.AttachEvidenceResponse{Ask: s.packet(ctx, tr.Run, tr.Run.Asks[a.ID], false)}, nil
}
