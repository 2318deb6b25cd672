package identity

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// algEdDSA is the only JWS algorithm a Verifier accepts.
const algEdDSA = "EdDSA"

// maxTokenBytes bounds the size of a token Verify will parse.
const maxTokenBytes = 8 << 10

// Config configures a [Verifier].
//
// Issuer and Audience are required: a token's "iss" must equal Issuer and its
// "aud" must contain Audience. Keys maps a key id (the JWS "kid" header) to
// an Ed25519 public key and must hold at least one key; with exactly one key
// a token without "kid" is checked against it. Leeway (>= 0) is the clock
// skew allowed on "exp", "nbf" and "iat". Now is the clock; nil means
// time.Now.
//
// OIDC, when set, verifies the tokens whose "iss" is its issuer (people
// signed in at the organisation's OpenID provider); the configured keys
// verify the tokens of Issuer (services, dev users). Keys may then be
// empty, and Issuer must differ from the OIDC issuer.
type Config struct {
	Issuer   string
	Audience string
	Keys     map[string]ed25519.PublicKey
	Leeway   time.Duration
	Now      func() time.Time
	OIDC     *OIDCVerifier
}

// Verifier verifies bearer JWTs. Build one with [NewVerifier]; it is
// immutable and safe for concurrent use.
type Verifier struct {
	issuer string
	keys   map[string]ed25519.PublicKey
	only   ed25519.PublicKey // the key used when the token has no kid; nil unless exactly one key
	parser *jwt.Parser
	now    func() time.Time
	leeway time.Duration
	cache  *tokenCache
	oidc   *OIDCVerifier
}

// NewVerifier checks cfg and returns a Verifier for it. It copies the keys,
// so later changes to cfg.Keys do not affect the Verifier. Errors wrap
// [ErrInvalidConfig].
func NewVerifier(cfg Config) (*Verifier, error) {
	if cfg.Issuer == "" {
		return nil, fmt.Errorf("%w: issuer is required", ErrInvalidConfig)
	}
	if cfg.Audience == "" {
		return nil, fmt.Errorf("%w: audience is required", ErrInvalidConfig)
	}
	if len(cfg.Keys) == 0 && cfg.OIDC == nil {
		return nil, fmt.Errorf("%w: at least one verification key (or an OIDC issuer) is required", ErrInvalidConfig)
	}
	if cfg.OIDC != nil && cfg.OIDC.Issuer() == cfg.Issuer {
		return nil, fmt.Errorf("%w: the token issuer %q is also the OIDC issuer; give the static keys' tokens an issuer of their own", ErrInvalidConfig, cfg.Issuer)
	}
	if cfg.Leeway < 0 {
		return nil, fmt.Errorf("%w: leeway must not be negative", ErrInvalidConfig)
	}
	keys := make(map[string]ed25519.PublicKey, len(cfg.Keys))
	var only ed25519.PublicKey
	for kid, k := range cfg.Keys {
		if kid == "" {
			return nil, fmt.Errorf("%w: empty key id", ErrInvalidConfig)
		}
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: key %q is not an Ed25519 public key", ErrInvalidConfig, kid)
		}
		keys[kid] = append(ed25519.PublicKey(nil), k...)
		only = keys[kid]
	}
	if len(keys) != 1 {
		only = nil
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Verifier{
		issuer: cfg.Issuer,
		keys:   keys,
		only:   only,
		now:    now,
		leeway: cfg.Leeway,
		cache:  &tokenCache{},
		oidc:   cfg.OIDC,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{algEdDSA}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithTimeFunc(now),
			jwt.WithStrictDecoding(),
		),
	}, nil
}

// tokenClaims are the claims a token may carry: the registered ones plus an
// optional "kind" ([KindPerson] when absent).
type tokenClaims struct {
	jwt.RegisteredClaims
	Kind string `json:"kind,omitempty"`
}

// Errors the key lookup returns; Verify maps them to reasons.
var (
	errKeyAlg      = errors.New("unsupported algorithm")
	errKeyMissing  = errors.New("missing key id")
	errKeyUnknown  = errors.New("unknown key id")
	errKeyBadKidTy = errors.New("key id is not a string")
)

// key selects the verification key for t by its "kid" header.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	// WithValidMethods already pins the algorithm; checking the method here
	// too means no other algorithm can ever be handed an Ed25519 key.
	if t.Method != jwt.SigningMethodEdDSA {
		return nil, errKeyAlg
	}
	raw, present := t.Header["kid"]
	if !present {
		if v.only == nil {
			return nil, errKeyMissing
		}
		return v.only, nil
	}
	kid, ok := raw.(string)
	if !ok {
		return nil, errKeyBadKidTy
	}
	k, ok := v.keys[kid]
	if !ok {
		return nil, errKeyUnknown
	}
	return k, nil
}

// Verify checks token and returns the Principal it names. The token must be a
// compact JWS with alg "EdDSA" (any other alg, "none" included, is refused),
// signed by the configured key its "kid" selects (or the only key, when one
// is configured and there is no "kid"), with no "crit" header, and with
// claims: "exp" present and not passed, "nbf" and "iat" (when present) not in
// the future, all with the configured leeway; "iss" equal to the Issuer;
// "aud" containing the Audience; "sub" non-empty; "kind", when present,
// "person" or "service". The Principal has Subject "sub", Issuer "iss" and
// Kind "kind" (default [KindPerson]).
//
// Every failure wraps [ErrUnauthenticated] with a short lowercase reason
// ("token expired", "wrong audience", "unsupported algorithm EdDSA only",
// ...) and never includes the token.
//
// With an OIDC verifier configured, a token is routed by its (as yet
// unverified) "iss": the OIDC issuer's tokens go to [OIDCVerifier.Verify]
// (ctx bounds a key fetch), the others are checked as above; a token of
// neither issuer is refused as "unknown issuer". The sub claim may not
// start with "group:" or "role:".
func (v *Verifier) Verify(ctx context.Context, token string) (Principal, error) {
	if err := wellFormed(token); err != nil {
		return Principal{}, err
	}
	if v.oidc != nil {
		switch iss := peekIssuer(token); iss {
		case v.oidc.Issuer():
			return v.oidc.Verify(ctx, token)
		case v.issuer:
		default:
			return Principal{}, unauthenticated(fmt.Sprintf("unknown issuer %.100q: this server accepts tokens of %s (sign in with approvectl login)", iss, v.oidc.Issuer()))
		}
	}
	if p, ok := v.cache.get(token, v.now()); ok {
		return p, nil
	}
	var c tokenClaims
	t, err := v.parser.ParseWithClaims(token, &c, v.key)
	if err != nil {
		return Principal{}, unauthenticated(reasonFor(t, &c, err))
	}
	if _, crit := t.Header["crit"]; crit {
		return Principal{}, unauthenticated("unsupported critical header")
	}
	if c.Subject == "" {
		return Principal{}, unauthenticated("missing sub claim")
	}
	for _, pre := range reservedPrefixes {
		if strings.HasPrefix(c.Subject, pre) {
			return Principal{}, unauthenticated(fmt.Sprintf("sub claim starts with %q, which names a policy group or role, not a principal", pre))
		}
	}
	kind := c.Kind
	switch kind {
	case "":
		kind = KindPerson
	case KindPerson, KindService:
	case KindExecutor:
		return Principal{}, unauthenticated("executor identities must use mtls")
	default:
		return Principal{}, unauthenticated("unsupported principal kind")
	}
	p := Principal{Subject: c.Subject, Kind: kind, Issuer: c.Issuer}
	if c.ExpiresAt != nil { // required, so always
		ct := cachedToken{p: p, notOnAfter: c.ExpiresAt.Add(v.leeway)}
		for _, t := range []*jwt.NumericDate{c.NotBefore, c.IssuedAt} {
			if t != nil && t.Add(-v.leeway).After(ct.notBefore) {
				ct.notBefore = t.Add(-v.leeway)
			}
		}
		v.cache.put(token, ct)
	}
	return p, nil
}

// compactJWS reports whether token uses only the characters of a compact JWS
// (base64url and '.'); the base64 decoder alone would skip newlines.
func compactJWS(token string) bool {
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// reasonFor turns a jwt parse error into a reason. t and c are what the
// parser managed to decode before failing.
func reasonFor(t *jwt.Token, c *tokenClaims, err error) string {
	if errors.Is(err, jwt.ErrTokenMalformed) || t == nil || t.Header == nil {
		return "malformed token"
	}
	if alg, _ := t.Header["alg"].(string); alg != algEdDSA || errors.Is(err, errKeyAlg) {
		return "unsupported algorithm EdDSA only"
	}
	return claimReason(c, err)
}

// claimReason words the failures common to every issuer's tokens.
func claimReason(c *tokenClaims, err error) string {
	switch {
	case errors.Is(err, errKeyMissing):
		return "missing key id"
	case errors.Is(err, errKeyUnknown), errors.Is(err, errKeyBadKidTy):
		return "unknown key id"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "invalid signature"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unverifiable token"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not yet valid"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token used before issued"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		switch {
		case c.ExpiresAt == nil:
			return "missing exp claim"
		case c.Issuer == "":
			return "missing iss claim"
		case len(c.Audience) == 0 || len(c.Audience) == 1 && c.Audience[0] == "":
			return "missing aud claim"
		}
		return "missing required claim"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	}
	return "invalid token"
}

// peekIssuer is the "iss" claim of a compact JWS, unverified: only for
// choosing the verifier that then checks it. "" when it cannot be read.
func peekIssuer(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Issuer
}

// wellFormed is what every verifier checks before it parses a token:
// present, within maxTokenBytes, a compact JWS.
func wellFormed(token string) error {
	switch {
	case token == "":
		return unauthenticated("missing token")
	case len(token) > maxTokenBytes:
		return unauthenticated("token too large")
	case !compactJWS(token):
		return unauthenticated("malformed token")
	}
	return nil
}
