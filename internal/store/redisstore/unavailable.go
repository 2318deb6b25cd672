package redisstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// unavailable marks err with store.ErrUnavailable when it says Redis could
// not be reached or is not serving right now (no connection, a connection
// that broke, a server still loading its append-only file or failing
// over): the same call may succeed later. Any other error is returned as
// it is. The text of err (which names the socket or address) stays in the
// chain for the server's log; the control plane never sends it to a
// client for an ErrUnavailable.
func unavailable(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || !isUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

func isUnavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return true
	}
	return redis.IsLoadingError(err) || redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMaxClientsError(err)
}
