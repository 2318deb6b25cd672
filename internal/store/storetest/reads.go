package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// Reads is a store.Store that counts the calls reading runs or the clock:
// on a real store each is a round trip, so a test of a read path asserts
// how many it made.
type Reads struct {
	store.Store
	GetRunCalls, GetRunsCalls, RunVersionCalls, NowCalls atomic.Int64
}

func (s *Reads) GetRun(ctx context.Context, id string) (store.Run, error) {
	s.GetRunCalls.Add(1)
	return s.Store.GetRun(ctx, id)
}

func (s *Reads) GetRuns(ctx context.Context, ids []string) ([]store.Run, error) {
	s.GetRunsCalls.Add(1)
	return s.Store.GetRuns(ctx, ids)
}

func (s *Reads) RunVersion(ctx context.Context, id string) (int64, error) {
	s.RunVersionCalls.Add(1)
	return s.Store.RunVersion(ctx, id)
}

func (s *Reads) Now(ctx context.Context) (time.Time, error) {
	s.NowCalls.Add(1)
	return s.Store.Now(ctx)
}

// Reset sets every count to zero.
func (s *Reads) Reset() {
	s.GetRunCalls.Store(0)
	s.GetRunsCalls.Store(0)
	s.RunVersionCalls.Store(0)
	s.NowCalls.Store(0)
}

// String is what the store was asked since the last Reset.
func (s *Reads) String() string {
	return fmt.Sprintf("%d GetRun, %d GetRuns, %d RunVersion, %d Now", s.GetRunCalls.Load(), s.GetRunsCalls.Load(), s.RunVersionCalls.Load(), s.NowCalls.Load())
}
