package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// openRedis is replaced once the Redis store lands.
func openRedis(context.Context, string, bool, *slog.Logger) (store.Store, error) {
	return nil, errors.New("the Redis store is not built in yet")
}
