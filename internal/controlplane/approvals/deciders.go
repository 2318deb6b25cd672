package approvals

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/decidable"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// decidersTTL is how long a Deciders answer is reused for the same
// matters and ask under the same policy version. Deciders weighs every
// holder of a role that may decide the matters (for an action every
// member may decide, every member), and it is asked when a run starts
// (CheckStart) and again as its ask opens (Undecidable): once per run,
// not once per holder per run, keeps a start's cost from growing with
// the policy. The TTL bounds how late a delegation window that opened
// or closed (time, not a new policy version) is seen by these checks.
// They only refuse an ask nobody could decide; authority itself is
// judged afresh at decision time (Authorize), never from this cache.
const decidersTTL = 5 * time.Second

// decidersCacheSize bounds the answers kept (distinct matters and asks).
const decidersCacheSize = 1024

// cachedDeciders is the checks' view of policy: Deciders answers reused
// per (policy version, matters, ask) for decidersTTL, Floor as it is.
type cachedDeciders struct {
	policy Policy
	now    func() time.Time
	cache  *lru.Cache[string, decidersAnswer]
}

type decidersAnswer struct {
	ds authz.Deciders
	at time.Time
}

var _ decidable.Policy = (*cachedDeciders)(nil)

func newCachedDeciders(p Policy, now func() time.Time) *cachedDeciders {
	return &cachedDeciders{policy: p, now: now, cache: lru.New[string, decidersAnswer](decidersCacheSize)}
}

// Deciders implements decidable.Policy. The answer is shared: callers
// treat its slices as read-only (decidable clones before it filters).
func (c *cachedDeciders) Deciders(ctx context.Context, ms []authz.Matter, ask authz.RecipeAsk) (authz.Deciders, error) {
	k, err := json.Marshal(struct {
		V  string
		Ms []authz.Matter
		A  authz.RecipeAsk
	}{c.policy.Version(), ms, ask})
	if err != nil {
		return c.policy.Deciders(ctx, ms, ask)
	}
	key, now := string(k), c.now()
	hit, ok := c.cache.Get(key)
	if ok && now.Sub(hit.at) < decidersTTL && !now.Before(hit.at) {
		return hit.ds, nil
	}
	ds, err := c.policy.Deciders(ctx, ms, ask)
	if err != nil {
		return ds, err
	}
	c.cache.Add(key, decidersAnswer{ds: ds, at: now})
	return ds, nil
}

// Floor implements decidable.Policy.
func (c *cachedDeciders) Floor(domain, action string) (authz.Floor, bool) {
	return c.policy.Floor(domain, action)
}
