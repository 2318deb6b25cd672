// Package reporoot finds the checkout a test or tool runs in: the
// directory holding the main module's go.mod, from the working directory
// up (a test's working directory is its package's). Test support uses it
// to find what `make` built (bin/jaeger, tools/axe).
package reporoot

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// Module is the main module's path.
const Module = "github.com/tollgate-dev/tollgate"

// Find walks up from the working directory to the main module's go.mod
// and returns its directory.
func Find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the repository root (the go.mod of " + Module + ") is not above the working directory")
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
