package skills

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// DirAuthor is the author of versions loaded from a directory: the
// control plane, on its operator's behalf.
const DirAuthor = "controlplane"

// Directory limits: a directory is the operator's, but a mistake (the
// wrong mount) must not stall a start.
const (
	MaxDirSkills = 1000
	maxDirDepth  = 8
)

// Dir loads every SKILL.md under a directory into the registry through
// Put (OriginDir), at start and whenever a file changes; a skill whose
// file is gone is deleted if its latest version came from a directory.
// Several replicas may load the same directory: Put of an unchanged
// source stores nothing.
type Dir struct {
	reg      *Registry
	fsys     fs.FS
	where    string // for messages: the directory as the operator named it
	interval time.Duration
	log      *slog.Logger
	seen     map[string][32]byte // path → digest of what was last loaded
	names    map[string]string   // path → skill name it published
}

// NewDir returns a loader of fsys (named where in messages), looking for
// changes every interval.
func NewDir(reg *Registry, fsys fs.FS, where string, interval time.Duration, log *slog.Logger) *Dir {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dir{reg: reg, fsys: fsys, where: where, interval: interval, log: log, seen: map[string][32]byte{}, names: map[string]string{}}
}

// LoadResult is what one pass did.
type LoadResult struct {
	Published, Unchanged, Deleted []string // skill names
	// Refused maps a file to why it was not loaded (diagnostics as
	// FILE:LINE:COL lines, or the error).
	Refused map[string]string
}

// Load makes one pass over the directory. Only an unreadable directory
// is an error; a file that does not compile is reported in Refused and
// leaves the skill's previous version in force.
func (d *Dir) Load(ctx context.Context) (LoadResult, error) {
	out := LoadResult{Refused: map[string]string{}}
	files, err := d.find()
	if err != nil {
		return out, err
	}
	present := map[string]bool{}
	for _, f := range files {
		present[f] = true
		b, err := fs.ReadFile(d.fsys, f)
		if err != nil {
			out.Refused[f] = err.Error()
			continue
		}
		sum := sha256.Sum256(b)
		if old, ok := d.seen[f]; ok && old == sum {
			continue
		}
		res, err := d.reg.Put(ctx, PutRequest{Who: DirAuthor, Source: string(b), Origin: OriginDir, DefaultName: defaultName(f)})
		switch {
		case errors.Is(err, context.Canceled):
			return out, err
		case err != nil:
			out.Refused[f] = err.Error()
			d.log.LogAttrs(ctx, slog.LevelError, "skill not loaded", slog.String("file", path.Join(d.where, f)), slog.String("error", err.Error()))
			continue
		case !res.Saved:
			msg := compiler.FormatDiagnostics(path.Join(d.where, f), res.Diagnostics)
			out.Refused[f] = msg
			d.log.LogAttrs(ctx, slog.LevelError, "skill not loaded: it does not compile, or a gate of it nobody could decide", slog.String("file", path.Join(d.where, f)), slog.String("diagnostics", msg))
			d.seen[f] = sum // reported once per content, not every pass
			continue
		case res.Unchanged:
			out.Unchanged = append(out.Unchanged, res.Version.Name)
		default:
			out.Published = append(out.Published, res.Version.Name)
		}
		d.seen[f], d.names[f] = sum, res.Version.Name
	}
	for f, name := range d.names {
		if present[f] {
			continue
		}
		delete(d.names, f)
		delete(d.seen, f)
		v, err := d.reg.Get(ctx, name, 0)
		if err != nil || v.Origin != OriginDir {
			continue // gone already, or since published through the API: not the directory's to delete
		}
		if _, err := d.reg.Delete(ctx, DirAuthor, name, v.Version, OriginDir); err != nil && !errors.Is(err, errkind.NotFound) {
			out.Refused[f] = err.Error()
			continue
		}
		out.Deleted = append(out.Deleted, name)
		d.log.LogAttrs(ctx, slog.LevelInfo, "skill deleted: its file left the skills directory", slog.String("skill", name), slog.String("file", path.Join(d.where, f)))
	}
	sort.Strings(out.Published)
	sort.Strings(out.Unchanged)
	sort.Strings(out.Deleted)
	return out, nil
}

// Run loads the directory every interval until ctx ends.
func (d *Dir) Run(ctx context.Context) error {
	return tick.Every(ctx, d.interval, func(ctx context.Context) {
		if _, err := d.Load(ctx); err != nil && ctx.Err() == nil {
			d.log.LogAttrs(ctx, slog.LevelError, "skills directory unreadable", slog.String("dir", d.where), slog.String("error", err.Error()))
		}
	})
}

// find lists the SKILL.md files under the directory, sorted, within the
// limits. Folders that are symbolic links are followed (a Kubernetes
// ConfigMap mounts each item as a link into its ..data folder); hidden
// folders are not (..data itself, and its timestamped twin).
func (d *Dir) find() ([]string, error) {
	var files []string
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		entries, err := fs.ReadDir(d.fsys, dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			p := path.Join(dir, name)
			if strings.HasPrefix(name, ".") {
				continue
			}
			isDir := e.IsDir()
			if e.Type()&fs.ModeSymlink != 0 {
				st, err := fs.Stat(d.fsys, p)
				if err != nil {
					continue // a dangling link
				}
				isDir = st.IsDir()
			}
			switch {
			case isDir && depth < maxDirDepth:
				if err := walk(p, depth+1); err != nil {
					return err
				}
			case !isDir && name == "SKILL.md":
				if len(files) == MaxDirSkills {
					return fmt.Errorf("more than %d SKILL.md files", MaxDirSkills)
				}
				files = append(files, p)
			}
		}
		return nil
	}
	if err := walk(".", 1); err != nil {
		return nil, fmt.Errorf("skills directory %s: %w", d.where, err)
	}
	sort.Strings(files)
	return files, nil
}

// defaultName is the name of a SKILL.md without front matter `name`: its
// folder's ("" for one at the top, which then needs front matter).
func defaultName(file string) string {
	dir := path.Dir(file)
	if dir == "." {
		return ""
	}
	return path.Base(dir)
}
