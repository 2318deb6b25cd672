package authz

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzParsePolicy: whatever a policy file holds, the strict parser never
// panics; what it accepts, it accepts again the same way (rows and
// floors), every accepted floor is found by its own action, and every
// rule it keeps names an action some floor governs (a row for an action
// with no p2 row never loads as a grant).
func FuzzParsePolicy(f *testing.F) {
	for _, name := range []string{filepath.Join("testdata", "rules.csv"), filepath.Join("..", "..", "examples", "policy.csv")} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("p, role:a, d, x.y, 10\np2, d, x.y, 1, requester, INR\ng, bob, role:a, d, _, _\n"))
	f.Add([]byte("p, role:a, d, x.*, -\np2, d, x.*, 1, none, -\n"))
	f.Add([]byte("p2, d, x.y, 0, nobody, ???\n\"unterminated"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := parsePolicy(src)
		if err != nil {
			return
		}
		again, err := parsePolicy(src)
		if err != nil || !slices.EqualFunc(p.rows, again.rows, slices.Equal) || len(p.floors) != len(again.floors) {
			t.Fatalf("the same source parsed twice differently: %v", err)
		}
		for k := range p.floors {
			if _, ok := p.lookup(k.domain, k.action); !ok {
				t.Fatalf("floor %s/%s is not found by its own action", k.domain, k.action)
			}
		}
		for _, r := range p.rules {
			if _, ok := p.floors[floorKey{r.domain, r.action}]; !ok {
				t.Fatalf("rule %+v has no p2 row of its own", r)
			}
		}
	})
}
