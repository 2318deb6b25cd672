package api

import (
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// SplitAskID splits "RUN/ASK".
func SplitAskID(id string) (run, stop string, err error) {
	run, stop, ok := strings.Cut(id, "/")
	if !ok || run == "" || stop == "" {
		return "", "", fmt.Errorf("ask id %q is not RUN/ASK: %w", limits.Short(id), errkind.Invalid)
	}
	return run, stop, nil
}
