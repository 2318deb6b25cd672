package decidable

import (
	"errors"
	"strconv"
	"strings"
)

// ParseMinorUnits reads an amount in minor units as people and the API
// give it: a JSON integer ("400000", "-5"), or the same in quotes. It is
// exact: no fractions, exponents, floats, signs of "+", leading zeros or
// values beyond int64 — an amount that is not exactly an integer is an
// error, never rounded.
func ParseMinorUnits(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return 0, errors.New("want an integer amount in minor units")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, errors.New("want an integer amount in minor units, not " + strconv.Quote(s))
		}
	}
	if len(digits) > 1 && digits[0] == '0' {
		return 0, errors.New("an amount has no leading zeros: " + strconv.Quote(s))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("amount out of range: " + strconv.Quote(s))
	}
	return v, nil
}
