package authz

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// 1,000 reloads in parallel with decisions on delegations whose windows
// have closed (a direct one and a chain with an expired second hop): not
// one wrong allow (trap 1), and the grants in force never flicker off.
func TestReloadRace(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0))
	path := a.cfg.PolicyPath
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Two versions of the policy that differ in a row nobody here uses, so
	// every reload really builds and publishes a new enforcer.
	versions := []string{string(orig), string(orig) + "g, nobody, role:member, acme, _, _\n"}

	const reloads = 1000
	var done atomic.Bool
	var wrong, checked, flicker atomic.Int64
	var wg sync.WaitGroup
	const enforcers = 8 // the figure: 8 goroutines enforcing throughout
	for i := range enforcers {
		wg.Go(func() {
			for n := 0; !done.Load() || n < 50; n++ {
				for _, actor := range []string{"hank", "ivan"} {
					d, _ := a.Authorize(context.Background(), Request{Actor: actor, Matter: pay(1)})
					checked.Add(1)
					if d.Allowed {
						wrong.Add(1)
					}
				}
				// ...while the grants in force stay in force.
				actor := []string{"frank", "kim", "alice", "carol"}[(n+i)%4]
				if d, err := a.Authorize(context.Background(), Request{Actor: actor, Matter: pay(1)}); err != nil || !d.Allowed {
					flicker.Add(1)
				}
			}
		})
	}
	seen := map[string]bool{}
	for n := range reloads {
		writeFile(t, path, versions[n%2])
		if err := a.Reload(); err != nil {
			done.Store(true)
			wg.Wait()
			t.Fatalf("reload %d: %v", n, err)
		}
		seen[a.Version()] = true
	}
	done.Store(true)
	wg.Wait()
	if len(seen) != 2 {
		t.Fatalf("%d versions seen, want 2: the reloads did not alternate", len(seen))
	}
	if wrong.Load() != 0 || flicker.Load() != 0 {
		t.Fatalf("%d wrong allows and %d wrong denials in %d decisions during %d reloads", wrong.Load(), flicker.Load(), checked.Load(), reloads)
	}
	t.Logf("%d decisions on closed windows during %d reloads: no wrong allow", checked.Load(), reloads)
}

// Watch picks up a changed file within a second, keeps the policy through a
// bad file, and returns when its context ends, leaving no goroutine
// (TestMain runs goleak).
func TestWatch(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0))
	path := a.cfg.PolicyPath
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- a.Watch(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Watch = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return after its context ended")
		}
	}()

	// waitVersion polls the state for at most a second.
	waitVersion := func(t *testing.T, changed func(string) bool) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		for time.Since(start) < time.Second {
			if v := a.Version(); changed(v) {
				return v, time.Since(start)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return a.Version(), time.Since(start)
	}

	v0 := a.Version()
	writeFile(t, path, strings.Replace(string(orig), "500000", "400000", 1))
	v1, took := waitVersion(t, func(v string) bool { return v != v0 })
	if v1 == v0 {
		t.Fatalf("no new version within %s", took)
	}
	if d, _ := a.Authorize(t.Context(), Request{Actor: "alice", Matter: pay(450000)}); d.Allowed || d.PolicyVersion != v1 {
		t.Fatalf("the new limit is not in force: %+v", d)
	}
	t.Logf("new version after %s", took)

	// A bad file: the version holds for longer than Watch takes to see it.
	writeFile(t, path, string(orig)+"g, zed, role:finance\n")
	if v, _ := waitVersion(t, func(v string) bool { return v != v1 }); v != v1 {
		t.Fatalf("a bad file changed the version to %s", v)
	}
	// Fixed again, and also edited in place rather than renamed.
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if v, took := waitVersion(t, func(v string) bool { return v == v0 }); v != v0 {
		t.Fatalf("the original policy not back within %s", took)
	}
}
