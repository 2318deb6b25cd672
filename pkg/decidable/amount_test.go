package decidable

import (
	"math/big"
	"strings"
	"testing"
)

func TestParseMinorUnits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"400000", 400000, true}, {`"400000"`, 400000, true}, {" 7 ", 7, true}, {"0", 0, true}, {"-5", -5, true},
		{"9223372036854775807", 1<<63 - 1, true}, {"9007199254740993", 9007199254740993, true},
		{"9223372036854775808", 0, false}, {"4e5", 0, false}, {"400000.0", 0, false}, {"400000.5", 0, false},
		{"+5", 0, false}, {"007", 0, false}, {"", 0, false}, {"-", 0, false}, {"0x10", 0, false}, {"1_000", 0, false},
		{`"`, 0, false}, {"--5", 0, false}, {"5 5", 0, false},
	} {
		got, err := ParseMinorUnits(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMinorUnits(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// Whatever it accepts is exactly the integer written: big.Int agrees.
func FuzzParseMinorUnits(f *testing.F) {
	for _, s := range []string{"400000", "-1", "9007199254740993", "1e3", "0.5", `"12"`, "00", "9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMinorUnits(s)
		if err != nil {
			return
		}
		text := strings.Trim(strings.TrimSpace(s), `"`)
		b, ok := new(big.Int).SetString(text, 10)
		if !ok || !b.IsInt64() || b.Int64() != v || b.String() != text {
			t.Fatalf("ParseMinorUnits(%q) = %d, but the text says %v", s, v, b)
		}
	})
}
