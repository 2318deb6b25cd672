package web

import (
	"bytes"
	"strings"
	"testing"
)

// An ask that lets two fields be amended: each field is a form of its
// own, so a submit posts exactly one field and the value typed for it —
// never the first field with whatever was typed there (the form's
// values are read first-wins).
func TestAskPageAmendsOneFieldPerForm(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	p := packetView{ID: "r_1/ask_1", RunID: "r_1", Title: "pay", Open: true, MayDecide: true, Gate: true, Action: "/asks/r_1/ask_1", PayloadDigest: "sha256:p",
		Amendable: []amendView{{Field: "amount", Now: "90000", Min: 0, Max: 90000}, {Field: "fee", Now: "40", Min: 0, Max: 50}}}
	var b bytes.Buffer
	if err := pages["ask"].ExecuteTemplate(&b, "ask", map[string]any{"Data": p, "Who": "dave", "CSRF": "tok", "Path": "/asks/r_1/ask_1"}); err != nil {
		t.Fatal(err)
	}
	forms := 0
	for _, f := range strings.Split(b.String(), "<form")[1:] {
		f = f[:strings.Index(f, "</form>")]
		if !strings.Contains(f, `value="amend"`) {
			continue
		}
		forms++
		if n, m := strings.Count(f, `name="value"`), strings.Count(f, `name="field"`); n != 1 || m != 1 {
			t.Errorf("an amend form posts %d fields and %d values:\n%s", m, n, f)
		}
		if !strings.Contains(f, `name="csrf" value="tok"`) || !strings.Contains(f, `name="payload_digest" value="sha256:p"`) {
			t.Errorf("an amend form without its token or digest:\n%s", f)
		}
	}
	if forms != 2 {
		t.Fatalf("%d amend forms for two amendable fields", forms)
	}
}

// The sign-in page hands back the form token of whatever pre-session id
// its browser's cookie names; that must never be the token of a link
// session (whose id any holder of the link can read) or of a signed-in
// session with the same id.
func TestCSRFTokensAreSeparatedByKind(t *testing.T) {
	site, err := NewSite([]byte(strings.Repeat("k", MinKeyBytes)), "http://127.0.0.1:1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Site: site}
	id := "lnk_AAAAAAAAAAAAAAAAAAAAAA"
	pre := h.csrfToken(&session{ID: id})
	ln := h.csrfToken(&session{ID: id, Subject: "dave", Link: &link{ID: id, Ask: "r/a", Person: "dave"}})
	full := h.csrfToken(&session{ID: id, Subject: "dave"})
	if pre == ln || pre == full || ln == full {
		t.Fatalf("tokens of one id across kinds: pre %s link %s session %s", pre, ln, full)
	}
}
