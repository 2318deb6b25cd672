package identity

import (
	"crypto/sha256"
	"sync"
	"time"
)

// maxCachedTokens bounds the verified tokens a Verifier remembers.
const maxCachedTokens = 4096

// tokenCache remembers tokens whose signature and claims a Verifier has
// checked, so a client that sends the same token with every RPC costs one
// signature check, not one per call. A remembered token is accepted only
// while the clock is inside the window its claims allow (exp, nbf, iat,
// with the leeway); outside it, Verify parses the token again and answers
// exactly as it would without the cache. The cache holds digests, never
// tokens.
type tokenCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	p          Principal
	notBefore  time.Time // the later of nbf and iat, less the leeway (zero: none)
	notOnAfter time.Time // exp plus the leeway
	kid        string    // the key that signed it (OIDC: withdrawn keys un-vouch)
}

func (c *tokenCache) get(token string, now time.Time) (Principal, bool) {
	t, ok := c.entry(token, now)
	return t.p, ok
}

// entry is the remembered token, if it is inside its window at now.
func (c *tokenCache) entry(token string, now time.Time) (cachedToken, bool) {
	k := sha256.Sum256([]byte(token))
	c.mu.Lock()
	t, ok := c.m[k]
	c.mu.Unlock()
	if !ok || now.After(t.notOnAfter) || now.Before(t.notBefore) {
		return cachedToken{}, false
	}
	return t, true
}

func (c *tokenCache) put(token string, t cachedToken) {
	k := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[sha256.Size]byte]cachedToken{}
	}
	if len(c.m) >= maxCachedTokens {
		for k := range c.m { // evict one, any
			delete(c.m, k)
			break
		}
	}
	c.m[k] = t
}
