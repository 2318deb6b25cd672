package controlplane

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// catalogCheckEvery is how often the catalog files are read again, as
// often as the policy is (a ConfigMap update reaches the pod's volume by
// swapping a symlink, so the files are read, never watched).
const catalogCheckEvery = time.Second

// errUnreadable marks a catalog file that could not be read (as opposed
// to one that does not parse).
type errUnreadable struct{ error }

func (e errUnreadable) Unwrap() error { return e.error }

// readCatalogs merges catalog files (none: the built-in one) and returns
// the digest of their contents (set whenever every file could be read,
// even if one does not parse).
func readCatalogs(paths []string) (*compiler.Catalog, [32]byte, error) {
	if len(paths) == 0 {
		c, err := compiler.ParseCatalog(examples.Catalog)
		return c, sha256.Sum256(examples.Catalog), err
	}
	paths = slices.Compact(slices.Sorted(slices.Values(paths)))
	h := sha256.New()
	texts := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, [32]byte{}, errUnreadable{fmt.Errorf("read catalog: %w", err)}
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		texts[i] = b
	}
	sum := [32]byte(h.Sum(nil))
	var tools []compiler.ToolInfo
	for i, b := range texts {
		c, err := compiler.ParseCatalog(b)
		if err != nil {
			return nil, sum, fmt.Errorf("catalog %s: %w", paths[i], err)
		}
		for _, s := range c.Servers() {
			for _, n := range c.Tools(s) {
				t, _ := c.Lookup(s, n)
				tools = append(tools, t)
			}
		}
	}
	return compiler.NewCatalog(tools), sum, nil
}

// catalogReloader reads the --catalog files again and applies a changed
// catalog that parses. One that does not parse leaves the one in force and
// is logged once per content; a file that cannot be read (a volume being
// swapped) is tried again at the next check.
type catalogReloader struct {
	paths []string
	apply func(*compiler.Catalog) bool
	log   *slog.Logger
	cur   [32]byte
	bad   [32]byte
}

func newCatalogReloader(paths []string, first [32]byte, apply func(*compiler.Catalog) bool, log *slog.Logger) *catalogReloader {
	return &catalogReloader{paths: paths, apply: apply, log: log, cur: first}
}

// check reads the files once and applies them if they changed.
func (r *catalogReloader) check(context.Context) {
	c, sum, err := readCatalogs(r.paths)
	var unreadable errUnreadable
	switch {
	case errors.As(err, &unreadable):
		return // a volume being swapped: the next check
	case sum == r.cur:
		return
	case err != nil:
		if sum != r.bad {
			r.bad = sum
			r.log.Error("tool catalog not reloaded: the catalog in force stays", "error", err)
		}
		return
	}
	r.cur, r.bad = sum, [32]byte{}
	changed := r.apply(c)
	r.log.Info("tool catalog reloaded", "files", r.paths, "compiles_differently", changed)
}

// Watch checks every catalogCheckEvery until ctx ends.
func (r *catalogReloader) Watch(ctx context.Context) error {
	return tick.Every(ctx, catalogCheckEvery, r.check)
}
