// Command image builds Tollgate's container image without Docker: the three
// binaries (built beforehand, static), the CA bundle and the licence notices
// in one reproducible layer on an empty base. `make image` runs it; the
// Dockerfile runs it with -rootfs to ship the same files.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run parses args into Options, builds, and prints the image digest on stdout.
// The files' mtimes and the config's Created time come from
// $SOURCE_DATE_EPOCH (seconds), or are the Unix epoch without it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := Options{LicenseAllowlist: licenseAllowlist()}
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.BinDir, "bin", "", "directory holding controlplane, executor and approvectl (required)")
	fs.StringVar(&o.RepoDir, "repo", "../..", "the Tollgate repository's root, where go list finds the modules for the licence notices")
	fs.StringVar(&o.CACerts, "cacerts", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to ship as /etc/ssl/certs/ca-certificates.crt")
	fs.StringVar(&o.Arch, "arch", "amd64", "GOARCH the binaries were built for")
	fs.StringVar(&o.Tag, "tag", "tollgate:dev", "image name NAME:TAG, in the layout's index and the tarball")
	fs.StringVar(&o.Version, "version", "dev", "org.opencontainers.image.version label")
	fs.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision label (the commit)")
	fs.StringVar(&o.Source, "source", "https://github.com/tollgate-dev/tollgate", "org.opencontainers.image.source label")
	fs.StringVar(&o.LayoutDir, "oci", "", "write an OCI image layout to this directory")
	fs.StringVar(&o.TarballPath, "tar", "", "write a docker load-able tarball to this file")
	fs.StringVar(&o.RootfsDir, "rootfs", "", "write the image's files to this directory (the Dockerfile copies them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.BinDir == "" || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("usage: -bin DIR and at least one of -oci, -tar, -rootfs; no arguments")
	}
	o.Epoch = time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970: %w", s, err)
		}
		o.Epoch = time.Unix(sec, 0).UTC()
	}
	digest, err := Build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, digest)
	return nil
}
