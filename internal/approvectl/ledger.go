package approvectl

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/client/grantledger"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// openLedger opens the --ledger a verifier remembers used grants in: a
// Redis URL (redis://, rediss://, unix://) for a ledger shared by every
// verifier that names it, else a file path (FileLedger).
func openLedger(ctx context.Context, spec string) (grant.Ledger, func(), error) {
	for _, scheme := range []string{"redis://", "rediss://", "unix://"} {
		if strings.HasPrefix(spec, scheme) {
			l, err := grantledger.Open(ctx, grantledger.Config{URL: spec})
			if err != nil {
				return nil, nil, err
			}
			return l, func() { l.Close() }, nil
		}
	}
	return FileLedger{Path: spec}, func() {}, nil
}

// FileLedger is a grant.Ledger in a JSON file, so `grant verify` — a
// process per check — refuses a grant a previous check on this host
// accepted (verifiers elsewhere share a Redis ledger instead). An
// exclusive flock on the file serializes concurrent checks; entries are
// dropped once their grant has expired.
type FileLedger struct{ Path string }

// Use implements grant.Ledger.
func (l FileLedger) Use(key string, until, now time.Time) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o700); err != nil {
		return false, err
	}
	f, err := os.OpenFile(l.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return false, fmt.Errorf("lock %s: %w", l.Path, err)
	}
	used := map[string]time.Time{}
	if err := json.NewDecoder(f).Decode(&used); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read ledger %s: %w", l.Path, err)
	}
	for k, exp := range used {
		if !now.Before(exp) {
			delete(used, k)
		}
	}
	if _, dup := used[key]; dup {
		return false, nil
	}
	used[key] = until
	b, err := json.Marshal(used)
	if err != nil {
		return false, err
	}
	if err := f.Truncate(0); err != nil {
		return false, err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return false, err
	}
	return true, f.Sync()
}

// loadKeys reads trusted grant keys: ID=FILE, or FILE for the id the
// control plane signs with ("grant").
func loadKeys(specs []string) (map[string]ed25519.PublicKey, error) {
	out := map[string]ed25519.PublicKey{}
	for _, s := range specs {
		id, path, ok := strings.Cut(s, "=")
		if !ok {
			id, path = "grant", s
		}
		k, err := identity.LoadPublicKeyPEM(path)
		if err != nil {
			return nil, usageErr("--key %s: %v", s, err)
		}
		out[id] = k
	}
	return out, nil
}
