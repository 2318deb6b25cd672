package authz

import (
	"context"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// Policy answers kept for the inbox (issue 22). An inbox page asks
// Authorize about one person for each of its rows: the same person, a
// handful of actions, amounts spread over a few of policy's limits. The
// answer is a function of a few things only, and those are the key:
//
//   - the policy: answers live in the snapshot, so a reload starts with
//     none (nothing kept outlives the version it was judged by);
//   - the person and their identity provider's groups, in order;
//   - the matter's domain and the row its action falls under;
//   - its amount band (index.bands): amounts with as many of the rules'
//     limits below them are within exactly the same rules' limits;
//   - the epoch (index.bounds): between two window sides no link comes
//     into or out of force, so a delegation window that ends starts a new
//     epoch, and with it new answers, at the instant it ends;
//   - the requester and the agent owner, each only when the person is
//     that party or could ever act for them (index.delegates), or when
//     the words name them (`ask me`): to anyone else the answer is the
//     same whoever they are, since casbin's g(person, party) is false at
//     every moment;
//   - the recipe's ask: audience, approvers and quorum.
//
// The Reason is kept with the amount as a slot (reason), and worded for
// each request's amount, so a kept answer reads exactly as a fresh one.

// answerCacheSize bounds the answers a policy keeps.
const answerCacheSize = 4096

func newAnswerCache() *lru.Cache[answerKey, answer] {
	return lru.New[answerKey, answer](answerCacheSize)
}

// answerKey is what an Authorize answer depends on, but for the wording
// of its amount. Lists are joinExact'ed.
type answerKey struct {
	actor, groups       string
	domain, action      string // action: the row the matter falls under
	band, epoch         int
	requester, owner    string // "" when the answer is the same whoever they are
	audience, approvers string
	quorum              int
}

// answer is a Decision without its Reason, and the reason to word it.
type answer struct {
	d   Decision
	why reason
}

// AuthorizeCached is Authorize answered, when this policy has judged the
// same question already, from the answers it keeps: the same Decision,
// Reason and all, as Authorize gives at that moment. It is for views
// that ask about many asks at once — the inbox, whether an ask shows,
// who a run is visible to. A decision itself is judged by Authorize.
func (a *Authorizer) AuthorizeCached(ctx context.Context, req Request) (Decision, error) {
	d, err := a.cur.Load().authorizeCached(ctx, req)
	if err != nil {
		d.Allowed = false
	}
	return d, err
}

func (s *snapshot) authorizeCached(ctx context.Context, req Request) (Decision, error) {
	d, f, done, err := s.admit(ctx, req)
	if done {
		return d, err
	}
	req.Matter.Action = f.action // the row it falls under: itself or a pattern
	epoch := s.pol.idx.epoch(s.now())
	k := s.answerKey(req, f, epoch)
	if hit, ok := s.answers.Get(k); ok {
		d := hit.d
		d.Reason = hit.why.in(req.Matter)
		return d, nil
	}
	d, why, err := s.judge(req, f)
	// Kept only when judged wholly within the epoch it is keyed by (the
	// clock may pass a window side while casbin evaluates).
	if err == nil && s.pol.idx.epoch(s.now()) == epoch {
		s.answers.Add(k, answer{d: d, why: why})
	}
	d.Reason = why.in(req.Matter)
	return d, err
}

func (s *snapshot) answerKey(req Request, f floorRow, epoch int) answerKey {
	m := req.Matter
	k := answerKey{actor: req.Actor, groups: joinExact(req.Groups), domain: m.Domain, action: f.action,
		band: s.pol.idx.band(m.Domain, f.action, m.Amount), epoch: epoch,
		audience: req.Ask.Audience, approvers: joinExact(req.Ask.Approvers), quorum: req.Ask.Quorum}
	if req.Ask.Audience == AudienceMe || s.pol.actsFor(req.Actor, m.Requester, m.Domain) {
		k.requester = m.Requester
	}
	if s.pol.actsFor(req.Actor, m.AgentOwner, m.Domain) {
		k.owner = m.AgentOwner
	}
	return k
}

// joinExact joins names so that no two lists join alike: each is
// length-prefixed.
func joinExact(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return strconv.Itoa(len(names[0])) + ":" + names[0]
	}
	var b strings.Builder
	for _, n := range names {
		b.WriteString(strconv.Itoa(len(n)))
		b.WriteByte(':')
		b.WriteString(n)
	}
	return b.String()
}
