// Package auditsvc serves tollgate.v1.AuditService: verifying a run's
// journal chain, checking the invariants over what was recorded, and
// listing the journal.
//
// Invariants it enforces, and where:
//   - I8: the journal is read back and its hash chain verified
//     (VerifyJournal); CheckInvariants reads I1 and I7 off the record.
//   - I9: only runs api.Readers lets the caller see.
package auditsvc

import (
	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
)

// Config is what the AuditService needs.
type Config struct {
	Runner  *runner.Runner
	Store   store.Store
	Readers api.Readers
}

// Service implements tollgatev1.AuditServiceServer.
type Service struct {
	tollgatev1.UnimplementedAuditServiceServer
	cfg Config
}

var _ tollgatev1.AuditServiceServer = (*Service)(nil)

// New returns the AuditService.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { tollgatev1.RegisterAuditServiceServer(gs, s) }
