package web

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func testKeys(t *testing.T) keys {
	t.Helper()
	k, err := newKeys([]byte(strings.Repeat("s", MinKeyBytes)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A sealed value opens only for the purpose it was sealed for, and not
// once a byte of it changed.
func TestSealBindsPurpose(t *testing.T) {
	k := testKeys(t)
	v, err := k.seal(purposeSession, session{ID: "i", Subject: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	var s session
	if err := k.open(purposeSession, v, &s); err != nil || s.Subject != "dave" {
		t.Fatalf("open: %v %+v", err, s)
	}
	if err := k.open(purposeSignin, v, &s); err == nil {
		t.Error("a session opened as a sign-in")
	}
	for i := range len(v) {
		b := []byte(v)
		b[i] ^= 1
		if k.open(purposeSession, string(b), &s) == nil {
			t.Fatalf("a sealed value with byte %d changed opened", i)
		}
	}
	other, _ := newKeys([]byte(strings.Repeat("o", MinKeyBytes)))
	if other.open(purposeSession, v, &s) == nil {
		t.Error("another key opened it")
	}
	if _, err := newKeys([]byte("short")); err == nil {
		t.Error("a short key was taken")
	}
}

// A link is good until the sooner of its TTL and its ask's deadline; a
// changed or foreign one says it is not valid, an expired one says when it
// expired.
func TestLinks(t *testing.T) {
	k := testKeys(t)
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tok, l, err := k.mintLink("r_1/ask_1", "dave", now.Add(time.Hour), now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Unix(l.Expires, 0); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("a link outlives its ask: %v", got)
	}
	got, err := k.parseLink(tok, now.Add(59*time.Minute))
	if err != nil || got != l {
		t.Fatalf("parse: %v %+v", err, got)
	}
	if _, err := k.parseLink(tok, now.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("at its deadline: %v", err)
	}
	body, sig, _ := strings.Cut(tok, ".")
	// Another person's link with this one's signature.
	forged, _, _ := k.mintLink("r_1/ask_1", "mallory", now.Add(time.Hour), now, time.Hour)
	fb, _, _ := strings.Cut(forged, ".")
	for name, bad := range map[string]string{"no signature": body, "another body": fb + "." + sig, "cut": tok[:len(tok)-4], "empty": ""} {
		if _, err := k.parseLink(bad, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	other, _ := newKeys([]byte(strings.Repeat("o", MinKeyBytes)))
	if _, err := other.parseLink(tok, now); err == nil {
		t.Error("another key's link accepted")
	}
	if _, _, err := k.mintLink("", "dave", now, now, time.Hour); err == nil {
		t.Error("a link to no ask")
	}
}

// After signing in, a browser goes back only to a path of this inbox.
func TestReturnToStaysHere(t *testing.T) {
	for in, want := range map[string]string{
		"/asks/r_1/ask_1":               "/asks/r_1/ask_1",
		"/runs?x=1":                     "/runs?x=1",
		"":                              "/",
		"https://evil.example/":         "/",
		"//evil.example/x":              "/",
		"/\\evil.example":               "/",
		"javascript:alert(1)":           "/",
		"/ok\r\nSet-Cookie: x=1":        "/",
		"/\t/evil.example":              "/", // a browser drops the tab: //evil.example
		"/\t\\evil.example":             "/",
		"/\x7f/x":                       "/",
		"/" + strings.Repeat("a", 3000): "/",
	} {
		if got := returnTo(in); got != want {
			t.Errorf("returnTo(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzReturnTo(f *testing.F) {
	for _, s := range []string{"/", "//x", "/\\x", "https://x", "/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := returnTo(s)
		// As a browser reads a Location: tab and newlines dropped, a
		// backslash a slash.
		seen := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(got)
		if !strings.HasPrefix(seen, "/") || strings.HasPrefix(seen, "//") || strings.ContainsAny(got, "\r\n") {
			t.Fatalf("returnTo(%q) = %q leaves the inbox", s, got)
		}
	})
}

func FuzzParseLink(f *testing.F) {
	k, _ := newKeys([]byte(strings.Repeat("s", MinKeyBytes)))
	now := time.Unix(1_800_000_000, 0)
	tok, _, _ := k.mintLink("r/a", "dave", time.Time{}, now, time.Hour)
	f.Add(tok)
	f.Add("x.y")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := k.parseLink(s, now)
		if err != nil {
			return
		}
		// Accepted: it is a body this key signed, naming an ask and a person.
		body, sig, _ := strings.Cut(s, ".")
		if sig != base64.RawURLEncoding.EncodeToString(mac(k.link, "link", body)) || l.Ask == "" || l.Person == "" {
			t.Fatalf("accepted %q → %+v", s, l)
		}
	})
}

// The inbox refuses to start where sessions would cross a network in the
// clear, or where nobody could sign in.
func TestNewSiteRefuses(t *testing.T) {
	key := []byte(strings.Repeat("s", MinKeyBytes))
	for _, base := range []string{"http://inbox.example.com", "ftp://127.0.0.1", "127.0.0.1:80", ""} {
		if _, err := NewSite(key, base, 0, nil); err == nil {
			t.Errorf("NewSite(%q) accepted", base)
		}
	}
	for _, base := range []string{"http://127.0.0.1:7445", "https://inbox.example.com"} {
		if _, err := NewSite(key, base, 0, nil); err != nil {
			t.Errorf("NewSite(%q): %v", base, err)
		}
	}
	s, _ := NewSite(key, "https://inbox.example.com", 0, nil)
	if _, err := New(Config{API: nil, Site: s}); err == nil {
		t.Error("New with no API")
	}
}
