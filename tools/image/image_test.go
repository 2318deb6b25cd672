package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the real binaries and the image from them, then reads the
// image back from the OCI layout (not from what Build holds in memory) and
// checks what the chart and the security review rely on.
func TestImage(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	args := []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", binDir + "/"}
	for _, b := range binaries {
		args = append(args, "./cmd/"+b)
	}
	build := exec.CommandContext(t.Context(), "go", args...)
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the binaries: %v\n%s", err, out)
	}

	out := t.TempDir()
	o := Options{BinDir: binDir, RepoDir: repo, CACerts: "/etc/ssl/certs/ca-certificates.crt", Arch: runtime.GOARCH,
		Tag: "tollgate:test", Version: "test", Revision: "abc123", Source: "https://example.com/tollgate",
		Epoch: time.Unix(1700000000, 0).UTC(), LicenseAllowlist: licenseAllowlist(),
		LayoutDir: filepath.Join(out, "oci"), TarballPath: filepath.Join(out, "tollgate.tar")}
	digest, err := Build(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}

	idx, err := layout.Path(o.LayoutDir).ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "tollgate:test" {
		t.Fatalf("layout index = %+v, want the one image %s named tollgate:test", im.Manifests, digest)
	}
	img, err := idx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	files := layerFiles(t, img)

	t.Run("config", func(t *testing.T) {
		c := cf.Config
		if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/controlplane"}) || c.User != "65532:65532" || c.WorkingDir != "/" {
			t.Errorf("entrypoint %q, user %q, workdir %q", c.Entrypoint, c.User, c.WorkingDir)
		}
		if want := []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}; !slices.Equal(c.Env, want) {
			t.Errorf("env %q, want %q", c.Env, want)
		}
		if ports := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(ports, []string{"7443/tcp", "7444/tcp", "9090/tcp"}) {
			t.Errorf("exposed ports %q", ports)
		}
		if c.Labels["org.opencontainers.image.version"] != "test" || c.Labels["org.opencontainers.image.revision"] != "abc123" ||
			c.Labels["org.opencontainers.image.source"] != o.Source || c.Labels["org.opencontainers.image.title"] != "tollgate" {
			t.Errorf("labels %v", c.Labels)
		}
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(o.Epoch) {
			t.Errorf("os %q arch %q created %v, want linux %s %v", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH, o.Epoch)
		}
	})

	t.Run("files", func(t *testing.T) {
		want := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
			"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/approvectl", "usr/local/bin/controlplane", "usr/local/bin/executor",
			"usr/share/", "usr/share/doc/", "usr/share/doc/tollgate/"}
		var got []string
		for p, f := range files {
			if f.hdr.Uid != 0 || f.hdr.Gid != 0 || !f.hdr.ModTime.Equal(o.Epoch) || f.hdr.Mode&0o022 != 0 {
				t.Errorf("%s: owner %d:%d mode %o mtime %v, want 0:0, not group/other-writable, %v", p, f.hdr.Uid, f.hdr.Gid, f.hdr.Mode, f.hdr.ModTime, o.Epoch)
			}
			if !strings.HasPrefix(p, licenseDir) {
				got = append(got, p)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("files outside %s:\n got %q\nwant %q", licenseDir, got, want)
		}
		for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh", "sbin/sh"} {
			if _, ok := files[shell]; ok {
				t.Errorf("the image has a shell: %s", shell)
			}
		}
		for _, b := range binaries {
			if m := files["usr/local/bin/"+b].hdr.Mode; m != 0o755 {
				t.Errorf("%s mode %o, want 755", b, m)
			}
		}
		if ca := files["etc/ssl/certs/ca-certificates.crt"].data; !bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) {
			t.Errorf("CA bundle (%d bytes) holds no certificate", len(ca))
		}
		if !bytes.Contains(files["etc/passwd"].data, []byte("nonroot:x:65532:65532:")) || !bytes.Contains(files["etc/group"].data, []byte("nonroot:x:65532:")) {
			t.Errorf("passwd/group do not name 65532 nonroot:\n%s%s", files["etc/passwd"].data, files["etc/group"].data)
		}
	})

	t.Run("static", func(t *testing.T) {
		for _, b := range binaries {
			f, err := elf.NewFile(bytes.NewReader(files["usr/local/bin/"+b].data))
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s has a PT_INTERP program header: dynamically linked (build with CGO_ENABLED=0)", b)
				}
			}
			if f.Section(".interp") != nil {
				t.Errorf("%s has an .interp section: dynamically linked", b)
			}
		}
	})

	t.Run("licenses", func(t *testing.T) {
		var notices []string
		for p, f := range files {
			if strings.HasPrefix(p, licenseDir) && f.hdr.Typeflag == tar.TypeReg {
				notices = append(notices, strings.TrimPrefix(p, licenseDir))
			}
		}
		for _, want := range []string{"go@", "google.golang.org/grpc@", "github.com/redis/go-redis/v9@"} {
			if !slices.ContainsFunc(notices, func(n string) bool { return strings.HasPrefix(n, want) }) {
				t.Errorf("no licence for %s* among %d notices", want, len(notices))
			}
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		again := o
		again.LayoutDir, again.TarballPath = filepath.Join(t.TempDir(), "oci"), ""
		d, err := Build(t.Context(), again)
		if err != nil {
			t.Fatal(err)
		}
		if d != digest {
			t.Errorf("rebuilt from the same input: digest %s, first %s", d, digest)
		}
	})

	t.Run("tarball", func(t *testing.T) {
		tag, err := name.NewTag(o.Tag)
		if err != nil {
			t.Fatal(err)
		}
		timg, err := tarball.ImageFromPath(o.TarballPath, &tag)
		if err != nil {
			t.Fatal(err)
		}
		got, err := timg.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := img.ConfigName(); got != want {
			t.Errorf("tarball config %s, layout's %s", got, want)
		}
	})

	root := t.TempDir()
	extract(t, root, files)
	t.Run("help", func(t *testing.T) {
		for _, b := range binaries {
			cmd := exec.CommandContext(t.Context(), filepath.Join(root, "usr/local/bin", b), "--help")
			cmd.Dir, cmd.Env = root, cf.Config.Env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Usage") || !strings.HasPrefix(string(out), b+" ") {
				t.Errorf("%s --help: %v\n%s", b, err, out)
			}
		}
	})

	// The image's own user on its own files: what the pod does, short of a
	// container runtime. Needs root (chroot); an extra, skipped otherwise.
	t.Run("chroot", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root for chroot --userspec; run go test as root to include it")
		}
		if _, err := exec.LookPath("chroot"); err != nil && os.Getenv("CI") != "true" {
			t.Skip("no chroot (coreutils) on PATH; install it to include this")
		}
		cmd := exec.CommandContext(t.Context(), "chroot", "--userspec=65532:65532", root, "/usr/local/bin/controlplane", "--help")
		cmd.Env = cf.Config.Env
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage") {
			t.Errorf("controlplane --help as 65532 in the image's tree: %v\n%s", err, out)
		}
	})
}

// TestLicenseMissing: a module without a licence file fails the build naming
// it, unless the allowlist gives a reason; other modules' files are copied.
func TestLicenseMissing(t *testing.T) {
	with, without := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(with, "LICENSE.txt"), []byte("MIT"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(without, "README.md"), []byte("no licence here"), 0o444); err != nil {
		t.Fatal(err)
	}
	mods := []module{{"example.com/has", "v1.0.0", with}, {"example.com/lacks", "v0.1.0", without}}
	_, err := licenseFiles(mods, nil)
	if err == nil || !strings.Contains(err.Error(), "example.com/lacks@v0.1.0") || strings.Contains(err.Error(), "example.com/has") {
		t.Fatalf("err = %v, want one naming example.com/lacks@v0.1.0 only", err)
	}
	got, err := licenseFiles(mods, map[string]string{"example.com/lacks": "public domain, says its README"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].path != licenseDir+"example.com/has@v1.0.0/LICENSE.txt" || string(got[0].data) != "MIT" || got[0].mode != 0o644 {
		t.Errorf("files = %+v", got)
	}
}

type layerFile struct {
	hdr  *tar.Header
	data []byte
}

// layerFiles reads the image's one layer, keyed by path (directories end in /).
func layerFiles(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	var names []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = layerFile{hdr, data}
		names = append(names, hdr.Name)
	}
	if !slices.IsSorted(names) {
		t.Errorf("layer entries not sorted: %q", names)
	}
	return files
}

// extract writes the layer's files under root, readable by anyone like an
// unpacked image (t.TempDir is 0700), so that 65532 can reach them.
func extract(t *testing.T, root string, files map[string]layerFile) {
	t.Helper()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, f := range files {
		dst := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if f.hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(dst, f.data, os.FileMode(f.hdr.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}
