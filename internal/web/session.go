package web

import (
	"crypto/hmac"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/internal/identity"
)

// session is who a browser signed in as, sealed into a cookie (the person
// can neither read nor change it). Groups are the identity provider's at
// sign-in: a change at the provider is seen at the next sign-in.
type session struct {
	ID      string   `json:"i"`
	Subject string   `json:"s"`
	Kind    string   `json:"k"`
	Issuer  string   `json:"is"`
	Groups  []string `json:"g,omitempty"`
	Expires int64    `json:"e"`
	// Link, when set, makes this a link session: the holder of a
	// single-use link who was let in by it alone (Config.LinkSignsIn),
	// for that one ask.
	Link *link `json:"l,omitempty"`
}

func (s *session) principal() identity.Principal {
	return identity.Principal{Subject: s.Subject, Kind: s.Kind, Issuer: s.Issuer, Groups: slices.Clone(s.Groups)}
}

// signin is the state of a sign-in at the OpenID provider, sealed in a
// short-lived cookie between the redirect and the callback.
type signin struct {
	State    string `json:"s"`
	Verifier string `json:"v"` // PKCE
	Nonce    string `json:"n"`
	Return   string `json:"r"`
	Expires  int64  `json:"e"`
}

const (
	purposeSession = "session"
	purposeSignin  = "signin"
	signinTTL      = 10 * time.Minute
)

// cookieName is the session cookie's name: __Host- (Secure, path /, no
// domain: no other host or path can set it) when served over https.
func (h *Handler) cookieName(base string) string {
	if h.secure {
		return "__Host-" + base
	}
	return base
}

func (h *Handler) setCookie(w http.ResponseWriter, base, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(base), Value: value, Path: "/", MaxAge: int(maxAge / time.Second),
		HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
}

func (h *Handler) clearCookie(w http.ResponseWriter, base string) {
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(base), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
}

// startSession signs the browser in as p.
func (h *Handler) startSession(w http.ResponseWriter, p identity.Principal) error {
	now := h.cfg.Now()
	s := session{ID: randomID(), Subject: p.Subject, Kind: p.Kind, Issuer: p.Issuer, Groups: p.Groups, Expires: unixTime(now.Add(h.cfg.SessionTTL))}
	v, err := h.keys.seal(purposeSession, s)
	if err != nil {
		return err
	}
	h.setCookie(w, "tollgate_session", v, h.cfg.SessionTTL)
	return nil
}

// session is the browser's session, or nil when it has none (or an
// expired or forged one).
func (h *Handler) session(r *http.Request) *session {
	c, err := r.Cookie(h.cookieName("tollgate_session"))
	if err != nil {
		return nil
	}
	var s session
	if h.keys.open(purposeSession, c.Value, &s) != nil || s.Subject == "" || s.Link != nil {
		return nil
	}
	if !h.cfg.Now().Before(time.Unix(s.Expires, 0)) {
		return nil
	}
	return &s
}

// csrfToken is the token every state-changing form of a session carries:
// bound to the session's id (a token of one session is no good for
// another) under a key of its own.
func (h *Handler) csrfToken(s *session) string {
	return base64.RawURLEncoding.EncodeToString(mac(h.keys.csrf, "csrf", s.csrfKind(), s.ID))
}

// csrfKind separates the tokens of the three kinds of session: a
// pre-session's id is whatever its browser's cookie says (the sign-in
// page would hand back the token of any id it is given), so its tokens
// must never be another kind's — a link session's id is readable in its
// link.
func (s *session) csrfKind() string {
	switch {
	case s.Link != nil:
		return "link"
	case s.Subject == "":
		return "pre"
	}
	return "session"
}

// checkCSRF refuses a state change that did not come from one of this
// inbox's own pages: the form's token must be the session's, and a
// browser that says where the request came from (Origin, Sec-Fetch-Site)
// must say this site.
func (h *Handler) checkCSRF(r *http.Request, s *session) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			return false
		}
	}
	got, err := base64.RawURLEncoding.DecodeString(r.PostFormValue("csrf"))
	if err != nil || s == nil {
		return false
	}
	return hmac.Equal(got, mac(h.keys.csrf, "csrf", s.csrfKind(), s.ID))
}

// preSession is the session-like id a browser that has not signed in yet
// holds for the dev picker's form (login CSRF): a random cookie, and the
// form carries the CSRF token bound to it.
func (h *Handler) preSession(w http.ResponseWriter, r *http.Request) *session {
	if c, err := r.Cookie(h.cookieName("tollgate_pre")); err == nil && len(c.Value) >= 16 && len(c.Value) <= 64 {
		return &session{ID: c.Value}
	}
	id := randomID()
	h.setCookie(w, "tollgate_pre", id, signinTTL)
	return &session{ID: id}
}
