package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignIsHMACOverTimestampDotBody(t *testing.T) {
	secret, body := []byte("0123456789abcdef"), []byte(`{"a":1}`)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("1767182400." + string(body)))
	if got, want := Sign(secret, 1767182400, body), m.Sum(nil); !bytes.Equal(got, want) {
		t.Fatalf("Sign = %x, want %x", got, want)
	}
	h := SignatureHeader(time.Unix(1767182400, 999), body, secret)
	if want := "t=1767182400,v1=" + hex.EncodeToString(m.Sum(nil)); h != want {
		t.Fatalf("header = %s, want %s", h, want)
	}
}

func TestSignatureHeaderRoundTrip(t *testing.T) {
	k1, k2 := []byte("first-secret-0123"), []byte("second-secret-456")
	h := SignatureHeader(time.Unix(42, 0), []byte("body"), k1, k2)
	s, err := ParseSignatureHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	if s.Timestamp != 42 || len(s.V1) != 2 || !bytes.Equal(s.V1[0], Sign(k1, 42, []byte("body"))) || !bytes.Equal(s.V1[1], Sign(k2, 42, []byte("body"))) {
		t.Fatalf("parsed %+v", s)
	}
	if s.String() != h {
		t.Fatalf("String = %s, want %s", s.String(), h)
	}
}

func TestParseSignatureHeader(t *testing.T) {
	v := strings.Repeat("ab", 32)
	ok := []struct {
		name, h string
		ts      int64
		n       int
	}{
		{"plain", "t=10,v1=" + v, 10, 1},
		{"order free", "v1=" + v + ",t=10", 10, 1},
		{"blanks", " t=10 ,\tv1=" + v + " ", 10, 1},
		{"upper hex", "t=10,v1=" + strings.ToUpper(v), 10, 1},
		{"two v1", "t=10,v1=" + v + ",v1=" + v, 10, 2},
		{"unknown scheme ignored", "t=10,v0=zz,v2=whatever,v1=" + v, 10, 1},
		{"max v1", "t=10" + strings.Repeat(",v1="+v, MaxSignatures), 10, MaxSignatures},
	}
	for _, c := range ok {
		s, err := ParseSignatureHeader(c.h)
		if err != nil || s.Timestamp != c.ts || len(s.V1) != c.n {
			t.Errorf("%s: got %+v, %v", c.name, s, err)
		}
	}
	bad := []struct{ name, h string }{
		{"empty", ""},
		{"no t", "v1=" + v},
		{"no v1", "t=10"},
		{"only other schemes", "t=10,v2=" + v},
		{"two t", "t=10,t=11,v1=" + v},
		{"negative t", "t=-10,v1=" + v},
		{"plus t", "t=+10,v1=" + v},
		{"empty t", "t=,v1=" + v},
		{"hex t", "t=0x10,v1=" + v},
		{"t too long", "t=1234567890123456789,v1=" + v},
		{"short v1", "t=10,v1=" + v[:62]},
		{"long v1", "t=10,v1=" + v + "ab"},
		{"non-hex v1", "t=10,v1=" + strings.Repeat("zz", 32)},
		{"no =", "t=10,v1" + v},
		{"empty key", "t=10,=x,v1=" + v},
		{"trailing comma", "t=10,v1=" + v + ","},
		{"too many v1", "t=10" + strings.Repeat(",v1="+v, MaxSignatures+1)},
		{"too long", "t=10,v1=" + v + ",x=" + strings.Repeat("a", MaxSignatureHeader)},
	}
	for _, c := range bad {
		if s, err := ParseSignatureHeader(c.h); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %+v, %v; want ErrMalformed", c.name, s, err)
		}
	}
}

// FuzzParseSignatureHeader: the parser never panics, fails only with
// ErrMalformed, and what it accepts re-formats to a header that parses to
// the same values.
func FuzzParseSignatureHeader(f *testing.F) {
	v := strings.Repeat("0f", 32)
	for _, s := range []string{
		"t=10,v1=" + v, "t=1767182400,v1=" + v + ",v1=" + v, " t = 1 , v1=" + v, "t=10,v2=x,v1=" + v,
		"t=,v1=", ",,,", "t=99999999999999999999,v1=" + v, "=", "t=1\x00,v1=" + v,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		s, err := ParseSignatureHeader(h)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if s.Timestamp < 0 || len(s.V1) == 0 || len(s.V1) > MaxSignatures {
			t.Fatalf("accepted %q as %+v", h, s)
		}
		for _, sig := range s.V1 {
			if len(sig) != sha256.Size {
				t.Fatalf("accepted %q with a %d-byte signature", h, len(sig))
			}
		}
		again, err := ParseSignatureHeader(s.String())
		if err != nil {
			t.Fatalf("re-parsing %q: %v", s.String(), err)
		}
		if again.Timestamp != s.Timestamp || len(again.V1) != len(s.V1) {
			t.Fatalf("round trip %+v → %+v", s, again)
		}
		for i := range s.V1 {
			if !bytes.Equal(again.V1[i], s.V1[i]) {
				t.Fatalf("round trip changed v1[%d]", i)
			}
		}
	})
}
