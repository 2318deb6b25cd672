package dispatch

import (
	"errors"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// grantFor signs the grant a side-effecting lease of o carries (I2): an
// Ed25519 signature over run, step, action, ask, payload digest, fence and
// expiry, which the executor verifies against the args it receives and
// uses once. With no signing key configured there is no grant, so the step
// is not leased (it stays waiting): without one the executor refuses it.
func (d *Dispatcher) grantFor(o offer, now time.Time) (*tollgatev1.Grant, error) {
	if d.cfg.SigningKey == nil {
		return nil, errors.New("no grant signing key configured")
	}
	digest, err := freshness.PayloadDigest(o.d.Args)
	if err != nil {
		return nil, err
	}
	ask := o.d.Grant
	if ask == engine.GrantStart {
		ask = ""
	}
	g := &grant.Grant{RunID: o.runID, StepID: o.d.Step, Action: o.d.Server + "." + o.d.Tool, AskID: ask, PayloadDigest: digest, Fence: uint64(o.d.Attempt), ExpiresAt: now.Add(d.cfg.GrantTTL)}
	grant.Sign(g, d.cfg.KeyID, d.cfg.SigningKey)
	if err := faults.At(faults.AfterGrantSigned); err != nil {
		return nil, err
	}
	return wire.Grant(g), nil
}
