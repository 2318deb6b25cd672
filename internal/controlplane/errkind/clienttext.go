package errkind

import (
	"errors"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// ClientText is what a client (a caller or an executor) is told of err.
// A store that is unavailable is named only as that: the error it wraps
// names the store's socket or address, which go to the server's log,
// never to a client.
func ClientText(err error) string {
	if errors.Is(err, store.ErrUnavailable) {
		return store.ErrUnavailable.Error() + "; retry later"
	}
	return err.Error()
}
