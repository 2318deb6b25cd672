package controlplane

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startDev runs the control plane (--dev, loopback, ports of its own) with
// extra args until it listens, then stops it; the error is Run's.
func startDev(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	home := t.TempDir()
	args = append([]string{"--dev", "--home", home, "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0"}, args...)
	return Run(ctx, args, MainConfig{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" },
		Ready: func(string) { cancel() }})
}

// Item 16 (issue 13): a control plane does not start on an empty policy
// file — which denies everyone — unless told to (--policy-allow-empty, or
// policy_allow_empty in the config file).
func TestItem16_ControlPlaneRefusesToStartOnAnEmptyPolicy(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(empty, []byte("# rules go here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := startDev(t, "--policy", empty)
	if err == nil || !strings.Contains(err.Error(), "no p rule") || !strings.Contains(err.Error(), "--policy-allow-empty") {
		t.Fatalf("start on an empty policy: %v", err)
	}
	if err := startDev(t, "--policy", empty, "--policy-allow-empty"); err != nil {
		t.Fatalf("start on an empty policy with --policy-allow-empty: %v", err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("policy_allow_empty: true\npolicy_max_drop: 0.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := startDev(t, "--policy", empty, "--config", cfg); err != nil {
		t.Fatalf("start on an empty policy with policy_allow_empty in the config: %v", err)
	}
	for _, bad := range []string{"0", "1.5", "-0.1"} {
		if err := startDev(t, "--policy-max-drop", bad); err == nil || !strings.Contains(err.Error(), "--policy-max-drop") {
			t.Errorf("--policy-max-drop %s: %v", bad, err)
		}
	}
}
