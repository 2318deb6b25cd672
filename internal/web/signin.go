package web

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/tollgate-dev/tollgate/internal/identity"
)

// returnTo is a path on this inbox to come back to after signing in;
// anything else (another site, a scheme-relative //host) is the inbox.
// A control character anywhere sends it to the inbox too: browsers drop
// tabs and newlines from a Location before reading it, so "/\t/evil"
// would be followed as "//evil", another site.
func returnTo(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || len(p) > 2048 ||
		strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "/"
	}
	return p
}

// needSignin sends a browser that is not signed in to the sign-in page,
// to come back to where it was.
func (h *Handler) needSignin(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/signin?return="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	pre := h.preSession(w, r)
	h.render(w, r, http.StatusOK, "signin", nil, map[string]any{
		"Return":   returnTo(r.URL.Query().Get("return")),
		"OIDC":     h.oauth != nil,
		"Issuer":   issuerOf(h.cfg.OIDC),
		"DevUsers": h.cfg.DevUsers,
		"PreCSRF":  h.csrfToken(pre),
		"Notice":   r.URL.Query().Get("why"),
	})
}

func issuerOf(o *OIDC) string {
	if o == nil {
		return ""
	}
	return o.Issuer
}

// signinDev signs in as a dev user (controlplane --dev): a picker, not a
// sign-in; it exists only when dev users are configured.
func (h *Handler) signinDev(w http.ResponseWriter, r *http.Request) {
	user := r.PostFormValue("user")
	if len(h.cfg.DevUsers) == 0 || !slices.Contains(h.cfg.DevUsers, user) {
		h.fail(w, r, http.StatusForbidden, nil, "no such dev user")
		return
	}
	c, err := r.Cookie(h.cookieName("tollgate_pre"))
	if err != nil || !h.checkCSRF(r, &session{ID: c.Value}) {
		h.fail(w, r, http.StatusForbidden, nil, "this sign-in did not come from this inbox's sign-in page (its form token is missing or wrong); open the sign-in page again")
		return
	}
	if err := h.startSession(w, identity.Principal{Subject: user, Kind: identity.KindPerson, Issuer: h.cfg.DevIssuer}); err != nil {
		h.fail(w, r, http.StatusInternalServerError, nil, "could not start a session")
		return
	}
	h.clearCookie(w, "tollgate_pre")
	http.Redirect(w, r, returnTo(r.PostFormValue("return")), http.StatusSeeOther)
}

// signinStart sends the browser to the OpenID provider: the
// authorization-code flow with PKCE (S256), a state compared on return,
// and a nonce the ID token must carry.
func (h *Handler) signinStart(w http.ResponseWriter, r *http.Request) {
	if h.oauth == nil {
		h.fail(w, r, http.StatusNotFound, nil, "no OpenID provider is configured")
		return
	}
	st := signin{State: randomID(), Verifier: oauth2.GenerateVerifier(), Nonce: randomID(), Return: returnTo(r.URL.Query().Get("return")),
		Expires: unixTime(h.cfg.Now().Add(signinTTL))}
	v, err := h.keys.seal(purposeSignin, st)
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, nil, "could not start the sign-in")
		return
	}
	h.setCookie(w, "tollgate_signin", v, signinTTL)
	http.Redirect(w, r, h.oauth.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oauth2.SetAuthURLParam("nonce", st.Nonce)), http.StatusSeeOther)
}

// signinCallback ends a sign-in at the provider: the state must be the
// one this browser was sent with, the code is exchanged with the PKCE
// verifier, and the ID token is verified as the API verifies one (issuer,
// audience, keys pinned by type, groups) and must carry the nonce.
func (h *Handler) signinCallback(w http.ResponseWriter, r *http.Request) {
	if h.oauth == nil {
		h.fail(w, r, http.StatusNotFound, nil, "no OpenID provider is configured")
		return
	}
	c, err := r.Cookie(h.cookieName("tollgate_signin"))
	var st signin
	if err != nil || h.keys.open(purposeSignin, c.Value, &st) != nil || !h.cfg.Now().Before(time.Unix(st.Expires, 0)) {
		h.fail(w, r, http.StatusBadRequest, nil, "this sign-in was not started here, or took longer than 10 minutes; sign in again")
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		h.fail(w, r, http.StatusUnauthorized, nil, "the provider refused the sign-in: "+e+" "+q.Get("error_description"))
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		h.fail(w, r, http.StatusBadRequest, nil, "this sign-in's state does not match the one this browser started; sign in again")
		return
	}
	ctx := r.Context()
	if hc := h.cfg.OIDC.HTTPClient; hc != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	}
	tok, err := h.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		h.cfg.Log.Info("web sign-in: code exchange failed", "error", err)
		h.fail(w, r, http.StatusUnauthorized, nil, "the provider did not accept this sign-in's code; sign in again")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		h.fail(w, r, http.StatusUnauthorized, nil, "the provider sent no ID token")
		return
	}
	p, err := h.cfg.OIDC.Verifier.Verify(r.Context(), raw)
	if err != nil {
		h.cfg.Log.Info("web sign-in: ID token refused", "error", err)
		h.fail(w, r, http.StatusUnauthorized, nil, "the provider's ID token was not accepted: "+err.Error())
		return
	}
	if p.Issuer != h.cfg.OIDC.Issuer || subtle.ConstantTimeCompare([]byte(tokenNonce(raw)), []byte(st.Nonce)) != 1 {
		h.fail(w, r, http.StatusUnauthorized, nil, "the ID token was not issued for this sign-in (its nonce or issuer differs); sign in again")
		return
	}
	if err := h.startSession(w, p); err != nil {
		h.fail(w, r, http.StatusInternalServerError, nil, "could not start a session")
		return
	}
	h.clearCookie(w, "tollgate_signin")
	http.Redirect(w, r, st.Return, http.StatusSeeOther)
}

// tokenNonce is the nonce claim of a JWT the verifier already accepted.
func tokenNonce(jwt string) string {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return ""
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Nonce string `json:"nonce"`
	}
	if json.Unmarshal(body, &c) != nil {
		return ""
	}
	return c.Nonce
}

// signout ends the session (a POST with the session's CSRF token: a
// link cannot sign anyone out).
func (h *Handler) signout(w http.ResponseWriter, r *http.Request) {
	s := h.session(r)
	if s != nil && !h.checkCSRF(r, s) {
		h.fail(w, r, http.StatusForbidden, s, "this request did not come from one of this inbox's pages")
		return
	}
	h.clearCookie(w, "tollgate_session")
	http.Redirect(w, r, "/signin?why=signed+out", http.StatusSeeOther)
}
