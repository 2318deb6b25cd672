package main

import (
	"context"
	"log/slog"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
)

// openRedis opens the production store and says how durable it is.
func openRedis(ctx context.Context, url string, allowVolatile bool, log *slog.Logger) (store.Store, error) {
	s, err := redisstore.New(ctx, redisstore.Config{URL: url, AllowVolatile: allowVolatile})
	if err != nil {
		return nil, err
	}
	log.Info("redis store", "durability", s.Durability())
	return s, nil
}
