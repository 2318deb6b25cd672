package metrics

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// PolicyHealth is what the policy gauges read at scrape time (an
// *authz.Authorizer).
type PolicyHealth interface {
	Health() authz.Health
}

// policyInstruments registers tollgate_policy_reloads_refused_total (the
// distinct policy file contents a load refused: unparsable, empty, or
// dropping more rules than --policy-max-drop) and tollgate_policy_stale
// (1 while the file on disk is refused and the last good policy stays).
// Alert on stale: decisions follow a policy the file no longer says.
func (m *Metrics) policyInstruments(meter metric.Meter, p PolicyHealth) error {
	refused, err := meter.Int64ObservableCounter("tollgate_policy_reloads_refused",
		metric.WithDescription("Policy file contents a load refused (invalid, empty, or dropping more rules than --policy-max-drop); the last good policy stayed."))
	if err != nil {
		return err
	}
	stale, err := meter.Int64ObservableGauge("tollgate_policy_stale",
		metric.WithDescription("1 while the policy file on disk is refused and the last good policy stays in force; 0 otherwise."))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		h := p.Health()
		o.ObserveInt64(refused, int64(h.Refused))
		s := int64(0)
		if h.Stale {
			s = 1
		}
		o.ObserveInt64(stale, s)
		return nil
	}, refused, stale)
	return err
}
