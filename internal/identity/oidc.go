package identity

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// Bounds on what an OpenID provider's token may carry.
const (
	maxGroups      = 256
	maxNameBytes   = 256 // a person or a group name
	defaultRefresh = 30 * time.Second
	defaultMaxAge  = 10 * time.Minute
	defaultTimeout = 10 * time.Second
)

// Prefixes a person's name may not start with: policy reads them as a
// group or a role, and a token naming one would borrow its authority.
var reservedPrefixes = []string{GroupPrefix, "role:"}

// GroupPrefix marks an IdP group as a policy member: a person whose token
// lists group NAME counts as the member "group:NAME".
const GroupPrefix = "group:"

// OIDCConfig configures an [OIDCVerifier].
//
// Issuer is the provider's issuer URL, exactly as its discovery document
// and its tokens' "iss" say it. Audience is the client id tokens are
// issued to (an ID token's "aud"). PersonClaim names the claim that is the
// person (default "sub"; "email" counts only with "email_verified": true).
// GroupsClaim names the claim listing the person's groups (default
// "groups"; a string or a list of strings). Leeway and Now are as in
// [Config]. HTTPClient fetches discovery and keys (default: a client with a
// 10 s timeout). MinRefresh (default 30 s) is the least time between two
// key fetches; MaxAge (default 10 min) is how long a fetched key set is
// trusted before it is fetched again. Log receives key-refresh failures.
type OIDCConfig struct {
	Issuer      string
	Audience    string
	ClientID    string
	PersonClaim string
	GroupsClaim string
	Leeway      time.Duration
	Now         func() time.Time
	HTTPClient  *http.Client
	MinRefresh  time.Duration
	MaxAge      time.Duration
	Log         *slog.Logger
}

// OIDCVerifier verifies ID tokens of one OpenID provider: its signing keys
// come from the provider's JWKS (cached, refreshed on an unknown kid at
// most once per MinRefresh), each key's algorithm pinned by its type.
// Build one with [NewOIDCVerifier]; it is safe for concurrent use.
type OIDCVerifier struct {
	issuer, clientID string
	person, groups   string
	keys             *jwks
	parser           *jwt.Parser
	now              func() time.Time
	leeway           time.Duration
	cache            *tokenCache
	disc             Discovery
}

// Discovery is the provider's configuration document as read at start:
// its endpoints, for a sign-in through it (the web inbox's), so nothing
// fetches it twice.
func (v *OIDCVerifier) Discovery() Discovery { return v.disc }

// NewOIDCVerifier reads the provider's discovery document
// (Issuer/.well-known/openid-configuration), checks it names Issuer, and
// fetches its key set. Any failure is an error: a server must not start
// believing it accepts sign-ins it cannot check. Errors wrap
// [ErrInvalidConfig] for a bad cfg.
func NewOIDCVerifier(ctx context.Context, cfg OIDCConfig) (*OIDCVerifier, error) {
	if cfg.Issuer == "" {
		return nil, fmt.Errorf("%w: OIDC issuer is required", ErrInvalidConfig)
	}
	if cfg.Audience == "" {
		return nil, fmt.Errorf("%w: OIDC audience (client id) is required", ErrInvalidConfig)
	}
	if cfg.Leeway < 0 || cfg.MinRefresh < 0 || cfg.MaxAge < 0 {
		return nil, fmt.Errorf("%w: leeway, refresh and max age must not be negative", ErrInvalidConfig)
	}
	if cfg.PersonClaim == "" {
		cfg.PersonClaim = "sub"
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.PersonClaim == cfg.GroupsClaim {
		return nil, fmt.Errorf("%w: the person claim and the groups claim are both %q", ErrInvalidConfig, cfg.PersonClaim)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: defaultTimeout}
	}
	if cfg.MinRefresh == 0 {
		cfg.MinRefresh = defaultRefresh
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = defaultMaxAge
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	disc, err := Discover(ctx, cfg.HTTPClient, cfg.Issuer)
	var mismatch *IssuerMismatchError
	switch {
	case errors.As(err, &mismatch):
		return nil, fmt.Errorf("OIDC discovery for %s: %w; give exactly that as the issuer", cfg.Issuer, err)
	case err != nil:
		return nil, fmt.Errorf("OIDC discovery for %s: %w (is --oidc-issuer right and the provider reachable?)", cfg.Issuer, err)
	}
	if disc.JWKSURI == "" {
		return nil, fmt.Errorf("OIDC discovery for %s: no jwks_uri", cfg.Issuer)
	}
	keys := &jwks{url: disc.JWKSURI, client: cfg.HTTPClient, minRefresh: cfg.MinRefresh, maxAge: cfg.MaxAge, now: cfg.Now, log: cfg.Log}
	if err := keys.fetch(ctx); err != nil {
		return nil, fmt.Errorf("OIDC signing keys of %s: %w", cfg.Issuer, err)
	}
	return &OIDCVerifier{
		issuer: cfg.Issuer, clientID: cmp.Or(cfg.ClientID, cfg.Audience), person: cfg.PersonClaim, groups: cfg.GroupsClaim,
		keys: keys, now: cfg.Now, leeway: cfg.Leeway, cache: &tokenCache{}, disc: disc,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{"RS256", "ES256", algEdDSA}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithTimeFunc(cfg.Now),
			jwt.WithStrictDecoding(),
		),
	}, nil
}

// Issuer is the provider's issuer URL.
func (v *OIDCVerifier) Issuer() string { return v.issuer }

// KeyFetches is how many times the key set has been fetched (for tests
// and metrics).
func (v *OIDCVerifier) KeyFetches() int {
	v.keys.mu.Lock()
	defer v.keys.mu.Unlock()
	return v.keys.fetches
}

// oidcClaims are the registered claims plus every claim as raw JSON, for
// the configured person and groups claims.
type oidcClaims struct {
	tokenClaims
	all map[string]json.RawMessage
}

func (c *oidcClaims) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.tokenClaims); err != nil {
		return err
	}
	return json.Unmarshal(b, &c.all)
}

// pinError: the token's alg is not the one its key's type pins.
type pinError struct{ pinned string }

func (e *pinError) Error() string { return "algorithm not pinned for this key: " + e.pinned }

// Verify checks an ID token of the provider and returns the person it
// names: Kind [KindPerson], Subject the person claim, Groups the groups
// claim (deduplicated, sorted), Issuer the provider. The token must be a
// compact JWS whose alg is the one its key's type pins (the kid must name
// a key of the provider's set; an unknown kid refreshes the set, bounded),
// with no "crit" header, "exp" present and not passed, "nbf"/"iat" not in
// the future (with the leeway), "iss" the issuer and "aud" containing the
// audience. A person claim that is missing, not a string, too long, or
// starts with "group:" or "role:" refuses the token, as does a groups
// claim that is not a string or a list of at most 256 names (a group
// named with either prefix is left out). Failures wrap
// [ErrUnauthenticated] with a reason.
func (v *OIDCVerifier) Verify(ctx context.Context, token string) (Principal, error) {
	if err := wellFormed(token); err != nil {
		return Principal{}, err
	}
	if ct, ok := v.cache.entry(token, v.now()); ok && v.keys.has(ct.kid) {
		// A key the provider has since withdrawn un-vouches its tokens,
		// cached or not.
		return ct.p.clone(), nil
	}
	var c oidcClaims
	kid := ""
	t, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ = t.Header["kid"].(string)
		if kid == "" {
			return nil, errKeyMissing
		}
		ks, err := v.keys.lookup(ctx, kid)
		if err != nil {
			return nil, err
		}
		// Only the keys whose type pins the token's alg may verify it.
		var set jwt.VerificationKeySet
		var pinned []string
		for _, k := range ks {
			if k.alg == t.Method.Alg() {
				set.Keys = append(set.Keys, k.key)
			} else if !slices.Contains(pinned, k.alg) {
				pinned = append(pinned, k.alg)
			}
		}
		switch len(set.Keys) {
		case 0:
			return nil, &pinError{pinned: strings.Join(pinned, " or ")}
		case 1:
			return set.Keys[0], nil
		}
		return set, nil
	})
	if err != nil {
		return Principal{}, unauthenticated(v.reason(t, &c, kid, err))
	}
	if _, crit := t.Header["crit"]; crit {
		return Principal{}, unauthenticated("unsupported critical header")
	}
	if why := v.forUs(t, &c); why != "" {
		return Principal{}, unauthenticated(why)
	}
	person, why := v.personOf(c.all)
	if why != "" {
		return Principal{}, unauthenticated(why)
	}
	groups, why := v.groupsOf(c.all)
	if why != "" {
		return Principal{}, unauthenticated(why)
	}
	p := Principal{Subject: person, Kind: KindPerson, Issuer: c.Issuer, Groups: groups}
	ct := cachedToken{p: p, kid: kid, notOnAfter: c.ExpiresAt.Add(v.leeway)}
	for _, t := range []*jwt.NumericDate{c.NotBefore, c.IssuedAt} {
		if t != nil && t.Add(-v.leeway).After(ct.notBefore) {
			ct.notBefore = t.Add(-v.leeway)
		}
	}
	v.cache.put(token, ct)
	return p.clone(), nil
}

// reason words a parse failure for the person holding the token.
func (v *OIDCVerifier) reason(t *jwt.Token, c *oidcClaims, kid string, err error) string {
	if errors.Is(err, jwt.ErrTokenMalformed) || t == nil || t.Header == nil {
		return "malformed token"
	}
	alg, _ := t.Header["alg"].(string)
	var pe *pinError
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("algorithm %q does not match key %q (its type allows only %s)", alg, kid, pe.pinned)
	case !slices.Contains([]string{"RS256", "ES256", algEdDSA}, alg):
		return fmt.Sprintf("unsupported algorithm %q (RS256, ES256 or EdDSA, as the key's type pins)", alg)
	case errors.Is(err, errKeysUnavailable):
		return "the identity provider's signing keys are unavailable; try again later"
	case errors.Is(err, errKeyUnknown):
		return fmt.Sprintf("unknown key id %q: the identity provider no longer publishes it; sign in again", kid)
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired: sign in again"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience: the token was not issued for this server's client id"
	}
	return claimReason(&c.tokenClaims, err)
}

// forUs refuses a token of the provider that is not an ID token issued to
// this server's client: an access token (RFC 9068's typ at+jwt), or a
// token whose authorized party (azp) is another client — a provider lists
// more than one audience when a project or an audience mapper says so, and
// then only azp says whom it was issued to (OpenID Connect Core 3.1.3.7),
// so with several audiences azp is required.
func (v *OIDCVerifier) forUs(t *jwt.Token, c *oidcClaims) string {
	typ, _ := t.Header["typ"].(string)
	if typ = strings.ToLower(typ); typ == "at+jwt" || typ == "application/at+jwt" {
		return "an access token, not an ID token: send the ID token of your sign-in (approvectl login does)"
	}
	raw, ok := c.all["azp"]
	if !ok {
		if len(c.Audience) > 1 {
			return fmt.Sprintf("token names %d audiences and no azp: it does not say it was issued to client %q", len(c.Audience), v.clientID)
		}
		return ""
	}
	var azp string
	if json.Unmarshal(raw, &azp) != nil || azp != v.clientID {
		return fmt.Sprintf("token issued to client %.100s, not %q: sign in to this server's client", raw, v.clientID)
	}
	return ""
}

// personOf reads the person claim.
func (v *OIDCVerifier) personOf(all map[string]json.RawMessage) (string, string) {
	raw, ok := all[v.person]
	if !ok {
		return "", fmt.Sprintf("missing %s claim (the claim that names a person)", v.person)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", fmt.Sprintf("%s claim is not a string", v.person)
	}
	if v.person == "email" {
		var verified bool
		if r, ok := all["email_verified"]; !ok || json.Unmarshal(r, &verified) != nil || !verified {
			return "", "email is not verified by the identity provider"
		}
	}
	if why := checkName(v.person, s); why != "" {
		return "", why
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(s, p) {
			return "", fmt.Sprintf("%s claim %q starts with %q, which names a policy group or role, not a person", v.person, s, p)
		}
	}
	return s, ""
}

// groupsOf reads the groups claim: absent or null is none.
func (v *OIDCVerifier) groupsOf(all map[string]json.RawMessage) ([]string, string) {
	raw, ok := all[v.groups]
	if !ok || string(raw) == "null" {
		return nil, ""
	}
	var list []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if json.Unmarshal(raw, &list) != nil {
		return nil, fmt.Sprintf("%s claim is neither a string nor a list of strings", v.groups)
	}
	if len(list) > maxGroups {
		return nil, fmt.Sprintf("%s claim lists %d groups; at most %d", v.groups, len(list), maxGroups)
	}
	kept := list[:0]
	for _, g := range list {
		if why := checkName(v.groups, g); why != "" {
			return nil, why
		}
		// A group named "role:…" or "group:…" is no member policy can
		// mean (authz refuses such a name, and would refuse every decision
		// of its members): it is left out, the person's other groups kept.
		if !slices.ContainsFunc(reservedPrefixes, func(p string) bool { return strings.HasPrefix(g, p) }) {
			kept = append(kept, g)
		}
	}
	if len(kept) == 0 {
		return nil, ""
	}
	slices.Sort(kept)
	return slices.Compact(kept), ""
}

// checkName bounds a person or group name: not empty, valid UTF-8, at
// most maxNameBytes, no control characters.
func checkName(claim, s string) string {
	switch {
	case s == "":
		return fmt.Sprintf("%s claim holds an empty name", claim)
	case len(s) > maxNameBytes:
		return fmt.Sprintf("%s claim holds a name over %d bytes", claim, maxNameBytes)
	case !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Sprintf("%s claim holds a name with invalid characters", claim)
	}
	return ""
}
