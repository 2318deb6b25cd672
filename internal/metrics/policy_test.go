package metrics

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/authz"
)

type policyHealth struct{ h authz.Health }

func (p *policyHealth) Health() authz.Health { return p.h }

// Item 16 (issue 13): a refused policy reload shows in the metrics, not
// only in the log.
func TestItem16_RefusedPolicyReloadIsAMetric(t *testing.T) {
	src := &policyHealth{}
	obs, err := New(Config{Policy: src})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Shutdown(context.Background())
	g := gather(t, obs)
	if g.counter("tollgate_policy_reloads_refused_total", "", "") != 0 || g.gauge("tollgate_policy_stale", "", "") != 0 {
		t.Fatal("a healthy policy reads 0 and 0")
	}
	src.h = authz.Health{Refused: 2, Stale: true}
	g = gather(t, obs)
	if got := g.counter("tollgate_policy_reloads_refused_total", "", ""); got != 2 {
		t.Errorf("refused = %v, want 2", got)
	}
	if got := g.gauge("tollgate_policy_stale", "", ""); got != 1 {
		t.Errorf("stale = %v, want 1", got)
	}
}
