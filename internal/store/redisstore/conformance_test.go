package redisstore

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
)

// newStore starts a private redis-server and opens a store on it.
func newStore(t testing.TB, cfg Config, opts ...redistest.Option) (*Store, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t, opts...)
	cfg.URL = srv.URL()
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, srv
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t, Config{})
		return s
	})
}
