//go:build !faults

package faults

import "testing"

// TestAtOff: without the faults tag no point ever acts, whatever the
// environment says.
func TestAtOff(t *testing.T) {
	t.Setenv(EnvVar, "runner.after-commit=kill,grant.after-signed=fail")
	for range 3 {
		for _, p := range All() {
			if err := At(p); err != nil {
				t.Fatalf("At(%s) = %v, want nil without the faults tag", p, err)
			}
		}
	}
}
