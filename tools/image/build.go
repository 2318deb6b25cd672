package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what goes into the image and where it is written. The outputs
// (LayoutDir, TarballPath, RootfsDir) are each optional; at least one is set.
type Options struct {
	BinDir  string // holds controlplane, executor and approvectl, built static for linux/Arch
	RepoDir string // the main module's root: go list there finds the licences
	CACerts string // the CA bundle to ship
	Arch    string // GOARCH of the binaries

	Tag      string // the image's name in the layout and the tarball: tollgate:dev
	Version  string // label org.opencontainers.image.version
	Revision string // label org.opencontainers.image.revision (a commit)
	Source   string // label org.opencontainers.image.source (the repository's URL)
	Epoch    time.Time
	// LicenseAllowlist names modules allowed to lack a licence file, with the reason.
	LicenseAllowlist map[string]string

	LayoutDir   string // an OCI image layout; its index then names only this image
	TarballPath string // a docker load-able tarball
	RootfsDir   string // the files alone, for the Dockerfile
}

// Build assembles the image and writes the outputs asked for; it returns the
// image's manifest digest. The same binaries, CA bundle, licences and
// Options give the same digest.
func Build(ctx context.Context, o Options) (v1.Hash, error) {
	if o.LayoutDir == "" && o.TarballPath == "" && o.RootfsDir == "" {
		return v1.Hash{}, errors.New("no output: name an OCI layout, a tarball or a root filesystem directory")
	}
	files, err := rootFiles(o.BinDir, o.CACerts)
	if err != nil {
		return v1.Hash{}, err
	}
	mods, err := goModules(ctx, o.RepoDir, o.Arch)
	if err != nil {
		return v1.Hash{}, err
	}
	notices, err := licenseFiles(mods, o.LicenseAllowlist)
	if err != nil {
		return v1.Hash{}, err
	}
	files = append(files, notices...)
	if o.RootfsDir != "" {
		if err := writeDir(o.RootfsDir, files); err != nil {
			return v1.Hash{}, err
		}
	}
	img, err := image(files, o)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("computing the image digest: %w", err)
	}
	if o.LayoutDir != "" {
		p, err := layout.Write(o.LayoutDir, empty.Index)
		if err == nil {
			err = p.AppendImage(img,
				layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.Tag}),
				layout.WithPlatform(v1.Platform{OS: "linux", Architecture: o.Arch}))
		}
		if err != nil {
			return v1.Hash{}, fmt.Errorf("writing the OCI layout %s: %w", o.LayoutDir, err)
		}
	}
	if o.TarballPath != "" {
		tag, err := name.NewTag(o.Tag)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image tag %q (want NAME:TAG): %w", o.Tag, err)
		}
		if err := tarball.WriteToFile(o.TarballPath, tag, img); err != nil {
			return v1.Hash{}, fmt.Errorf("writing the tarball %s: %w", o.TarballPath, err)
		}
	}
	return digest, nil
}

// image puts files into one layer on empty.Image, with OCI media types and
// the config the chart relies on: controlplane as the entrypoint, uid/gid
// 65532, the three listeners' ports. Created is the epoch, like the files'
// mtimes, so that nothing in the image depends on when it was built.
func image(files []file, o Options) (v1.Image, error) {
	var layerTar bytes.Buffer
	if err := writeTar(&layerTar, files, o.Epoch); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	created := v1.Time{Time: o.Epoch.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: created, CreatedBy: "tools/image", Comment: "controlplane, executor, approvectl, CA bundle, licences"}})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", o.Arch, created
	cf.Config = v1.Config{
		Entrypoint: []string{"/usr/local/bin/controlplane"},
		User:       "65532:65532",
		Env:        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		WorkingDir: "/",
		// API, executor listener, admin (/healthz, /metrics).
		ExposedPorts: map[string]struct{}{"7443/tcp": {}, "7444/tcp": {}, "9090/tcp": {}},
		// No org.opencontainers.image.licenses: the repository has no licence yet.
		Labels: map[string]string{
			"org.opencontainers.image.title":   "tollgate",
			"org.opencontainers.image.source":  o.Source,
			"org.opencontainers.image.version": o.Version,
		},
	}
	if o.Revision != "" {
		cf.Config.Labels["org.opencontainers.image.revision"] = o.Revision
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the image config: %w", err)
	}
	return img, nil
}
