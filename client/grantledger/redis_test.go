package grantledger_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/client/grantledger"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

func signed(t *testing.T, ttl time.Duration) (*grant.Grant, []byte, map[string]ed25519.PublicKey) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	args := []byte(`{"branch":"main"}`)
	d, err := freshness.PayloadDigest(args)
	if err != nil {
		t.Fatal(err)
	}
	g := &grant.Grant{RunID: "r_1", StepID: "commit", Action: "gate.commit", AskID: "commit", PayloadDigest: d, Fence: 3, ExpiresAt: time.Now().Add(ttl)}
	grant.Sign(g, "grant", priv)
	return g, args, map[string]ed25519.PublicKey{"grant": pub}
}

func open(t *testing.T, url string) *grantledger.Redis {
	t.Helper()
	l, err := grantledger.Open(t.Context(), grantledger.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Item 17 (issue 13): verifiers that share one Redis ledger — each with a
// client of its own, as separate services have — accept a grant once.
func TestItem17_RedisLedgerIsSharedByVerifiers(t *testing.T) {
	r := redistest.Start(t)
	g, args, keys := signed(t, time.Minute)
	a := grant.NewVerifierWithLedger(keys, open(t, r.URL()))
	b := grant.NewVerifierWithLedger(keys, open(t, r.URL()))
	if err := a.VerifyPayload(g, "gate.commit", args, time.Now()); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := b.VerifyPayload(g, "gate.commit", args, time.Now()); !errors.Is(err, grant.ErrReused) {
		t.Fatalf("a replay at another verifier: %v, want ErrReused", err)
	}
	// The entry lives as long as the grant (plus the skew margin), no more.
	ttl, err := r.Do("PTTL", "tg:grant:"+g.Key())
	if err != nil {
		t.Fatal(err)
	}
	if ms := atoi(t, ttl); ms <= 0 || time.Duration(ms)*time.Millisecond > time.Minute+grantledger.DefaultSkewMargin {
		t.Fatalf("PTTL %s ms", ttl)
	}
}

// Item 17: N verifiers racing on one grant accept it exactly once (SET NX
// is atomic on the server).
func TestItem17_RacingVerifiersAcceptAGrantOnce(t *testing.T) {
	r := redistest.Start(t)
	g, args, keys := signed(t, time.Minute)
	const n = 32
	var accepted, reused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		v := grant.NewVerifierWithLedger(keys, open(t, r.URL()))
		wg.Go(func() {
			<-start
			switch err := v.VerifyPayload(g, "gate.commit", args, time.Now()); {
			case err == nil:
				accepted.Add(1)
			case errors.Is(err, grant.ErrReused):
				reused.Add(1)
			default:
				t.Errorf("verify: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if accepted.Load() != 1 || reused.Load() != n-1 {
		t.Fatalf("%d accepted, %d refused as reused, of %d", accepted.Load(), reused.Load(), n)
	}
}

// Item 17: a ledger that cannot answer refuses the grant (ErrLedger), and
// one on a Redis that keeps nothing on disk is refused at Open — a restart
// would forget every used grant.
func TestItem17_RedisLedgerFailsClosed(t *testing.T) {
	r := redistest.Start(t)
	g, args, keys := signed(t, time.Minute)
	v := grant.NewVerifierWithLedger(keys, open(t, r.URL()))
	r.Stop()
	if err := v.VerifyPayload(g, "gate.commit", args, time.Now()); !errors.Is(err, grant.ErrLedger) {
		t.Fatalf("Redis down: %v, want ErrLedger", err)
	}
	vol := redistest.Start(t, redistest.Volatile())
	if _, err := grantledger.Open(t.Context(), grantledger.Config{URL: vol.URL()}); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("a volatile Redis: %v", err)
	}
	l, err := grantledger.Open(t.Context(), grantledger.Config{URL: vol.URL(), AllowVolatile: true})
	if err != nil {
		t.Fatalf("a volatile Redis, allowed: %v", err)
	}
	l.Close()
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range strings.TrimSpace(s) {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
