package main

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"
)

// binaries are the programs the image ships, in /usr/local/bin.
var binaries = []string{"controlplane", "executor", "approvectl"}

// file is one regular file of the image's root filesystem. Its path is
// relative and slash-separated ("usr/local/bin/executor"); every file is owned
// by root, so the nonroot user the image runs as can read but not change it.
type file struct {
	path string
	mode int64
	data []byte
}

// rootFiles reads what the image holds besides the licence notices: the three
// binaries (0755), the CA bundle and a passwd/group naming the user the
// image runs as. There is deliberately nothing writable and no shell: the
// chart runs the pod with a read-only root filesystem and mounts emptyDirs
// where a process needs to write.
func rootFiles(binDir, caCerts string) ([]file, error) {
	var files []file
	for _, name := range binaries {
		data, err := os.ReadFile(filepath.Join(binDir, name))
		if err != nil {
			return nil, fmt.Errorf("reading binary %s (build it first, e.g. make image): %w", name, err)
		}
		files = append(files, file{path: "usr/local/bin/" + name, mode: 0o755, data: data})
	}
	ca, err := os.ReadFile(caCerts)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle (-cacerts names another): %w", err)
	}
	// Programs that look the user up (os/user, id, ps) find 65532 by name;
	// root is named because it owns every file.
	passwd := "root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n"
	group := "root:x:0:\nnonroot:x:65532:\n"
	return append(files,
		file{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		file{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		file{path: "etc/group", mode: 0o644, data: []byte(group)},
	), nil
}

// writeTar writes files as one layer: every parent directory gets an entry
// (0755), entries are sorted by path, owned by 0:0 and stamped with mtime, so
// the same files always give the same bytes and so the same digest.
func writeTar(w io.Writer, files []file, mtime time.Time) error {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	byPath := map[string]file{}
	for _, f := range files {
		if dirs[f.path] || byPath[f.path].path != "" {
			return fmt.Errorf("image file %s given twice (or also a directory)", f.path)
		}
		byPath[f.path] = f
	}
	names := make([]string, 0, len(dirs)+len(files))
	for d := range dirs {
		names = append(names, d)
	}
	for p := range byPath {
		names = append(names, p)
	}
	// A directory sorts before what it holds: it is a prefix of their paths.
	slices.Sort(names)
	tw := tar.NewWriter(w)
	for _, name := range names {
		hdr := &tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}
		f, isFile := byPath[name]
		if isFile {
			hdr = &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing the layer entry %s: %w", name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("writing the layer entry %s: %w", name, err)
		}
	}
	return tw.Close()
}

// writeDir writes files under dir, for the Dockerfile: it COPYs that tree
// onto scratch, so both builds ship the same files with the same modes
// (files get theirs whatever the umask; directories are made under it,
// 022 in a Dockerfile's RUN).
func writeDir(dir string, files []file) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("writing the root filesystem: %w", err)
		}
		if err := os.WriteFile(p, f.data, os.FileMode(f.mode)); err != nil {
			return fmt.Errorf("writing the root filesystem: %w", err)
		}
		if err := os.Chmod(p, os.FileMode(f.mode)); err != nil {
			return fmt.Errorf("writing the root filesystem: %w", err)
		}
	}
	return nil
}
