package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// licenseDir is where the notices go: one directory per module,
// MODULEPATH@VERSION, holding that module's own licence files.
const licenseDir = "usr/share/doc/tollgate/licenses/"

// licenseAllowlist names modules that may ship without a licence file, each
// with the reason; empty today, since every dependency carries one. Adding a
// module here is a decision to record in the review, not a way to silence
// the build.
func licenseAllowlist() map[string]string {
	return map[string]string{}
}

// licenseName matches the files that carry a module's licence or notices
// (LICENSE, LICENSE.txt, LICENCE.md, COPYING, NOTICE.txt...).
var licenseName = regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice)`)

// module is one dependency linked into the binaries.
type module struct{ path, version, dir string }

// goModules lists the modules the three binaries are built from, as go list
// sees them in repoDir for linux/arch, leaving out the main module; plus the
// Go standard library (as "go@GOVERSION", from GOROOT), which is linked in
// too and whose BSD licence asks for its notice in binary distributions.
func goModules(ctx context.Context, repoDir, arch string) ([]module, error) {
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = repoDir
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s in %s: %w: %s", strings.Join(args, " "), repoDir, err, stderr.Bytes())
		}
		return out, nil
	}
	env, err := run("env", "GOROOT", "GOVERSION")
	if err != nil {
		return nil, err
	}
	goroot, goversion, _ := strings.Cut(strings.TrimSpace(string(env)), "\n")
	goversion, _, _ = strings.Cut(goversion, " ") // "go1.26.8 X:..." with experiments
	mods := []module{{path: "go", version: goversion, dir: goroot}}

	args := []string{"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}\t{{.Version}}\t{{.Dir}}{{end}}{{end}}"}
	for _, name := range binaries {
		args = append(args, "./cmd/"+name)
	}
	out, err := run(args...)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 || seen[fields[0]] {
			continue
		}
		seen[fields[0]] = true
		if fields[2] == "" {
			return nil, fmt.Errorf("module %s %s has no directory: run go mod download in %s", fields[0], fields[1], repoDir)
		}
		mods = append(mods, module{path: fields[0], version: fields[1], dir: fields[2]})
	}
	return mods, nil
}

// licenseFiles copies each module's licence files (those at its root) into
// licenseDir. A module without one fails the build, naming it, unless
// allow gives a reason for it: shipping its code without its notice would
// break its licence.
func licenseFiles(mods []module, allow map[string]string) ([]file, error) {
	var files, missing []string
	var out []file
	for _, m := range mods {
		entries, err := os.ReadDir(m.dir)
		if err != nil {
			return nil, fmt.Errorf("reading module %s@%s for its licence: %w", m.path, m.version, err)
		}
		files = files[:0]
		for _, e := range entries {
			if e.Type().IsRegular() && licenseName.MatchString(e.Name()) {
				files = append(files, e.Name())
			}
		}
		if len(files) == 0 && allow[m.path] == "" {
			missing = append(missing, m.path+"@"+m.version)
		}
		for _, name := range files {
			data, err := os.ReadFile(filepath.Join(m.dir, name))
			if err != nil {
				return nil, fmt.Errorf("reading the licence of %s@%s: %w", m.path, m.version, err)
			}
			out = append(out, file{path: licenseDir + m.path + "@" + m.version + "/" + name, mode: 0o644, data: data})
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no LICENSE/LICENCE/COPYING/NOTICE file in module(s) %s: find its licence terms and add it to licenseAllowlist (tools/image/licenses.go) with the reason", strings.Join(missing, ", "))
	}
	return out, nil
}
