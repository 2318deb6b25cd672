package controlplane

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
)

// Behaviour the split into packages (issue 14) changed by mistake, found
// by review; each test failed on the split before its fix.

// Config.PlanCache 0 means DefaultPlanCache for every plan cache (its doc,
// and the runner's and the RunService's caches honour it). Before the
// refactor the plan-view cache was bounded by DefaultPlanCache whatever
// the Config said; NewServer now hands the raw 0 to wire.NewViews, whose
// lru clamps it to 1: every embedder that leaves PlanCache unset (the
// harness, test/e2e's world) redraws a plan view for every run of a
// second plan.
func TestPlanViewCacheDefaultsLikeTheOtherPlanCaches(t *testing.T) {
	e := newEnv(t, nil, nil) // PlanCache unset, as in test/e2e
	c := e.srv.Caches()
	for _, name := range []string{"plans", "compiled", "plan_views"} {
		if got := c[name].Bound; got != runner.DefaultPlanCache {
			t.Errorf("cache %s is bounded at %d with Config.PlanCache 0; want DefaultPlanCache (%d)", name, got, runner.DefaultPlanCache)
		}
	}
}

// The old loader decoded the file with yaml KnownFields(true), which also
// applies inside webhooks entries, and yaml.v3 refused a key given twice.
// The table's loader decodes each value with yaml.Node.Decode (no
// KnownFields) after walking the mapping itself (no duplicate check), so
// both are now accepted silently. A misspelt `kinds` (kind:) makes an
// endpoint receive every kind of notice instead of the ones it named.
func TestConfigFileRefusesUnknownWebhookKeysAndRepeatedKeys(t *testing.T) {
	for name, file := range map[string]string{
		"unknown key in a webhook": "webhooks:\n  - name: pager\n    url: http://127.0.0.1:9/hook\n    secret_file: s\n    roles: [finance]\n    kind: [opened]\n",
		"a key given twice":        "domain: a\ndomain: b\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp.yaml")
			if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
			var o Options
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o.register(fs)
			if err := o.load(path, fs); err == nil {
				t.Errorf("config %q loaded; before issue 14 it failed the start (webhooks %+v, domain %q)", file, o.Webhooks, o.Domain)
			}
		})
	}
}
