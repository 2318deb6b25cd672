package decidable

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Matter is the policy's view of one governed action taken by st in a
// run requester started: its type (st's Server "." Tool), who separation
// of duties keeps out (the requester and the agent's owner, by Owners),
// and the amount and currency st's Args carry (fields "amount", in minor
// units read exactly by ParseMinorUnits, and "currency"). Of st it reads
// ID (named in errors), Server, Tool and Args only. It needs no Policy.
// On an error the matter returned still names its action and people.
func (c *Checker) Matter(requester string, st plan.Step) (authz.Matter, error) {
	owner := requester
	if o, ok := c.cfg.Owners[requester]; ok {
		owner = o
	}
	m := authz.Matter{Domain: c.cfg.Domain, Action: st.Server + "." + st.Tool, Requester: requester, AgentOwner: owner}
	args, err := plan.DecodeObject(st.Args)
	if err != nil {
		return m, fmt.Errorf("args of %s: %w", st.ID, err)
	}
	if v, ok := args["amount"]; ok {
		n, err := ParseMinorUnits(fmt.Sprint(v))
		if err != nil {
			return m, fmt.Errorf("amount of %s: %w", st.ID, err)
		}
		m.Amount = &n
		m.Currency, _ = args["currency"].(string)
	}
	return m, nil
}
