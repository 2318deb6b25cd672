package web

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// A link is what a notice carries (webhook, Slack, email): bound to one
// ask and one person, short-lived, and single-use. Opening it (GET) only
// shows the packet; a decision is a deliberate POST from the page, and the
// engine refuses a second decision through the same link id on any replica
// (engine.ErrLinkUsed): the ask records each decision's link. A link is
// signed, not sealed — its fields are no secret, and the id alone cannot
// be turned into a link.
type link struct {
	ID      string `json:"i"`
	Ask     string `json:"a"`
	Person  string `json:"p"`
	Expires int64  `json:"e"`
}

// DefaultLinkTTL is how long a link is good for when the ask's deadline
// is further away.
const DefaultLinkTTL = 24 * time.Hour

// mintLink is the token of a new link for person to ask, good until the
// sooner of ttl from now and the ask's deadline.
func (k keys) mintLink(ask, person string, askExpires, now time.Time, ttl time.Duration) (string, link, error) {
	if ask == "" || person == "" {
		return "", link{}, fmt.Errorf("a link names one ask and one person")
	}
	exp := now.Add(ttl)
	if !askExpires.IsZero() && askExpires.Before(exp) {
		exp = askExpires
	}
	l := link{ID: "lnk_" + randomID(), Ask: ask, Person: person, Expires: unixTime(exp)}
	body, err := json.Marshal(l)
	if err != nil {
		return "", link{}, err
	}
	b := base64.RawURLEncoding.EncodeToString(body)
	sig := base64.RawURLEncoding.EncodeToString(mac(k.link, "link", b))
	return b + "." + sig, l, nil
}

// linkError says why a link is not accepted, in words for its holder.
type linkError struct{ why string }

func (e *linkError) Error() string { return e.why }

// parseLink checks a link token's signature and expiry.
func (k keys) parseLink(token string, now time.Time) (link, error) {
	b, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > maxSealed {
		return link{}, &linkError{"this is not a Tollgate link (it may have been cut short when it was copied)"}
	}
	want := mac(k.link, "link", b)
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, want) {
		return link{}, &linkError{"this link is not valid (it was changed, or was made by another Tollgate)"}
	}
	body, err := base64.RawURLEncoding.DecodeString(b)
	var l link
	if err != nil || json.Unmarshal(body, &l) != nil || l.Ask == "" || l.Person == "" || l.ID == "" {
		return link{}, &linkError{"this link is not valid"}
	}
	if exp := time.Unix(l.Expires, 0); !now.Before(exp) {
		return l, &linkError{fmt.Sprintf("this link expired at %s; open the ask from your inbox instead", exp.UTC().Format("2006-01-02 15:04 MST"))}
	}
	return l, nil
}
