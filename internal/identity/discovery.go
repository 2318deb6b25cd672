package identity

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Discovery is an OpenID provider's configuration document (OpenID
// Connect Discovery 1.0): the fields Tollgate uses, on both sides — the
// control plane verifying tokens (JWKSURI) and approvectl signing in (the
// OAuth 2.0 endpoints).
type Discovery struct {
	Issuer        string `json:"issuer"`
	JWKSURI       string `json:"jwks_uri"`
	AuthURL       string `json:"authorization_endpoint"`
	TokenURL      string `json:"token_endpoint"`
	DeviceAuthURL string `json:"device_authorization_endpoint"`
}

// IssuerMismatchError is a configuration document that names another
// issuer than the one asked for (Discovery §4.3: it must be the same,
// exactly); Named is what to give instead.
type IssuerMismatchError struct{ Asked, Named string }

func (e *IssuerMismatchError) Error() string {
	return fmt.Sprintf("the provider calls itself %q, not %q", e.Named, e.Asked)
}

// Discover reads issuer's configuration document through hc (its timeout
// bounds the wait; nil: a client of 10 s; the body is bounded too) and
// checks that it names issuer exactly ([IssuerMismatchError] if not).
func Discover(ctx context.Context, hc *http.Client, issuer string) (Discovery, error) {
	if hc == nil {
		hc = &http.Client{Timeout: defaultTimeout}
	}
	var d Discovery
	if err := getJSON(ctx, hc, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", &d); err != nil {
		return d, err
	}
	if d.Issuer != issuer {
		return d, &IssuerMismatchError{Asked: issuer, Named: d.Issuer}
	}
	return d, nil
}
