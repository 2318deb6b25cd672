package main

import (
	"context"
	"log/slog"

	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
)

// openRedis opens the production store and says how durable it is.
func openRedis(ctx context.Context, c controlplane.RedisConfig, log *slog.Logger) (store.Store, error) {
	s, err := redisstore.New(ctx, redisstore.Config{URL: c.URL, AllowVolatile: c.AllowVolatile, Password: c.Password, RootCAs: c.RootCAs})
	if err != nil {
		return nil, err
	}
	log.Info("redis store", "durability", s.Durability())
	return s, nil
}
