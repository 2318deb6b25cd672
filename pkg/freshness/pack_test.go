package freshness

import (
	"strings"
	"testing"
)

func TestPackTakesOnlyDigestsAsSumWritesThem(t *testing.T) {
	good := ContentDigest([]byte("x"))
	for _, c := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{strings.ToUpper(good[:7]) + good[7:], false}, // prefix case
		{good[:7] + strings.ToUpper(good[7:]), false}, // upper-case hex would not come back the same
		{good[:Size-1], false},
		{good + "0", false},
		{"sha512:" + good[7:], false},
		{good[:Size-1] + "g", false},
		{"", false},
	} {
		d, ok := Pack(c.in)
		if ok != c.ok {
			t.Errorf("Pack(%q) ok = %v, want %v", c.in, ok, c.ok)
			continue
		}
		if ok && Unpack(d[:]) != c.in {
			t.Errorf("Unpack(Pack(%q)) = %q", c.in, Unpack(d[:]))
		}
	}
}

func FuzzPackRoundTrips(f *testing.F) {
	f.Add(ContentDigest(nil))
	f.Add("sha256:zz")
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := Pack(s)
		if ok && Unpack(string(d[:])) != s {
			t.Fatalf("Unpack(Pack(%q)) = %q", s, Unpack(string(d[:])))
		}
		if !ok && len(s) == Size && s == Unpack(string(d[:])) && s[:7] == prefix {
			t.Fatalf("Pack refused %q, a digest as sum writes it", s)
		}
	})
}
