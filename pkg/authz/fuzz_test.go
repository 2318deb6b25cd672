package authz

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The reference rule: an independent, plain reading of the policy file and
// of what it means. It shares no code with the package (its own parsing,
// its own walk, big-integer amounts), so a bug in one is unlikely to be
// repeated in the other.
type refPolicy struct {
	rules  [][]string                 // role, domain, action, limit
	floors map[string][]string        // "domain action" → quorum, separate, currency
	links  [][]string                 // member, target, domain, from, until
	pairs  map[string]map[string]bool // "member target" → domains
}

func refParse(src string) refPolicy {
	p := refPolicy{floors: map[string][]string{}, pairs: map[string]map[string]bool{}}
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		switch f[0] {
		case "p":
			p.rules = append(p.rules, f[1:])
		case "p2":
			p.floors[f[1]+" "+f[2]] = f[3:]
		case "g":
			p.links = append(p.links, f[1:])
			k := f[1] + " " + f[2]
			if p.pairs[k] == nil {
				p.pairs[k] = map[string]bool{}
			}
			p.pairs[k][f[3]] = true
		}
	}
	return p
}

// sharedPairs: a member-target pair in several domains, where the package
// is documented to be stricter than the rule (beyond the first hop).
func (p refPolicy) sharedPairs() bool {
	for _, doms := range p.pairs {
		if len(doms) > 1 {
			return true
		}
	}
	return false
}

func refInForce(from, until string, t time.Time) bool {
	if from != "_" {
		f, err := time.Parse(time.RFC3339, from)
		if err != nil || t.Before(f) {
			return false
		}
	}
	if until != "_" {
		u, err := time.Parse(time.RFC3339, until)
		if err != nil || !t.Before(u) {
			return false
		}
	}
	return true
}

// holds: everything name holds in domain at t, itself included, at most 10 links away.
func (p refPolicy) holds(name, domain string, t time.Time) map[string]bool {
	got := map[string]bool{name: true}
	for range 10 {
		grew := false
		for _, l := range p.links {
			if got[l[0]] && !got[l[1]] && l[2] == domain && refInForce(l[3], l[4], t) {
				got[l[1]] = true
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	return got
}

func (p refPolicy) allowed(actor string, m Matter, t time.Time) bool {
	person := func(s string) bool { return s != "" && !strings.HasPrefix(s, "role:") }
	if !person(actor) || !person(m.Requester) || !person(m.AgentOwner) {
		return false
	}
	fl, ok := p.floors[m.Domain+" "+m.Action]
	if !ok {
		return false
	}
	if fl[2] == "-" {
		if m.Amount != nil || m.Currency != "" {
			return false
		}
	} else if m.Amount == nil || *m.Amount < 0 || m.Currency != fl[2] {
		return false
	}
	held := p.holds(actor, m.Domain, t)
	if strings.Contains(fl[1], "requester") && held[m.Requester] {
		return false
	}
	if strings.Contains(fl[1], "agent_owner") && held[m.AgentOwner] {
		return false
	}
	for _, r := range p.rules {
		if r[1] != m.Domain || r[2] != m.Action || !held[r[0]] {
			continue
		}
		switch r[3] {
		case "-", "unlimited":
			return true
		default:
			lim, ok := new(big.Int).SetString(r[3], 10)
			if ok && big.NewInt(*m.Amount).Cmp(lim) <= 0 {
				return true
			}
		}
	}
	return false
}

func fuzzNames() []string {
	return []string{"alice", "bob", "carol", "erin", "frank", "hank", "ivan", "judy", "kim", "lee", "sam", "gina", "tess", "uma", "zed", "olga", "role:finance", "finance", "", "role:member", "role:senior", "role:big"}
}

func fuzzWindows() [][2]string {
	return [][2]string{{"_", "_"}, {"2026-08-01T00:00:00Z", "2026-08-15T00:00:00Z"}, {"2026-09-01T00:00:00Z", "2026-09-15T00:00:00Z"}, {"_", "2026-09-05T12:00:00Z"}, {"2026-09-05T12:00:00Z", "_"}, {"2026-10-01T00:00:00Z", "_"}}
}

// FuzzAuthorize: random requests, at random times, under the test policy
// plus random extra links, are never allowed when the reference rule says
// deny; and, where no link pair spans domains, never denied when it says
// allow.
func FuzzAuthorize(f *testing.F) {
	base, err := os.ReadFile(filepath.Join("testdata", "rules.csv"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), uint8(1), uint8(15), uint8(0), uint8(0), int64(500000), true, uint8(0), int32(0), []byte{})
	f.Add(uint8(0), uint8(1), uint8(15), uint8(0), uint8(0), int64(500001), true, uint8(0), int32(0), []byte{})
	f.Add(uint8(4), uint8(3), uint8(15), uint8(0), uint8(0), int64(1), true, uint8(0), int32(0), []byte{})
	f.Add(uint8(6), uint8(1), uint8(15), uint8(0), uint8(0), int64(1), true, uint8(0), int32(-20000), []byte{})
	f.Add(uint8(11), uint8(1), uint8(15), uint8(0), uint8(1), int64(1<<53+1), true, uint8(0), int32(0), []byte{})
	f.Add(uint8(1), uint8(1), uint8(1), uint8(0), uint8(2), int64(0), false, uint8(2), int32(0), []byte{})
	f.Add(uint8(15), uint8(1), uint8(2), uint8(0), uint8(0), int64(9), true, uint8(0), int32(0), []byte{15, 8, 0, 2, 8, 0, 0, 1})
	f.Add(uint8(14), uint8(1), uint8(2), uint8(0), uint8(0), int64(9), true, uint8(0), int32(0), []byte{14, 6, 0, 0, 14, 6, 1, 0})
	c := newClock(t0)
	model := []byte(defaultModel)
	fuzzNames, fuzzWindows := fuzzNames(), fuzzWindows()
	f.Fuzz(func(t *testing.T, ai, ri, oi, di, xi uint8, amt int64, hasAmt bool, ci uint8, minutes int32, extra []byte) {
		src := string(base)
		for i := 0; i+4 <= len(extra) && i < 4*12; i += 4 {
			w := fuzzWindows[int(extra[i+3])%len(fuzzWindows)]
			src += fmt.Sprintf("g, %s, %s, %s, %s, %s\n", fuzzNames[int(extra[i])%len(fuzzNames)], fuzzNames[int(extra[i+1])%len(fuzzNames)],
				[]string{"acme", "globex"}[extra[i+2]%2], w[0], w[1])
		}
		pol, err := parsePolicy([]byte(src))
		if err != nil {
			t.Skip(err) // an invalid extra row (a self link, an empty name, a repeat)
		}
		s, err := newSnapshot(model, pol, c.Now)
		if err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Duration(minutes%(90*24*60)) * time.Minute)
		c.Set(at)
		m := Matter{
			Domain:     []string{"acme", "globex", "initech", ""}[int(di)%4],
			Action:     []string{"payments.pay", "payments.big", "notes.store", "payments.refund", "pay", ""}[int(xi)%6],
			Currency:   []string{"INR", "USD", ""}[int(ci)%3],
			Requester:  fuzzNames[int(ri)%len(fuzzNames)],
			AgentOwner: fuzzNames[int(oi)%len(fuzzNames)],
		}
		if hasAmt {
			m.Amount = &amt
		}
		actor := fuzzNames[int(ai)%len(fuzzNames)]
		d, _ := s.authorize(context.Background(), Request{Actor: actor, Matter: m})
		ref := refParse(src)
		want := ref.allowed(actor, m, at)
		if d.Allowed && !want {
			t.Fatalf("wrong allow at %s: %s decides %+v: %+v", at, actor, m, d)
		}
		if !d.Allowed && want && !ref.sharedPairs() {
			t.Fatalf("wrong denial at %s: %s decides %+v: %+v", at, actor, m, d)
		}
	})
}
