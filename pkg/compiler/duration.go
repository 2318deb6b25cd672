package compiler

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var durationPart = regexp.MustCompile(`^(\d+)\s*(w|d|h|m|s)`)

// parseDuration reads durations as authors write them: "24h", "8h", "90m",
// "2d", "1w", "1h30m". Units: w(eek), d(ay), h, m, s. It must be positive.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("a duration is missing (write it like 8h, 30m or 2d)")
	}
	rest := s
	var total time.Duration
	for rest != "" {
		m := durationPart.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("%q is not a duration (write it like 8h, 30m, 2d or 1h30m)", s)
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n > 100000 {
			return 0, fmt.Errorf("%q is too long a duration", s)
		}
		unit := map[string]time.Duration{"w": 7 * 24 * time.Hour, "d": 24 * time.Hour, "h": time.Hour, "m": time.Minute, "s": time.Second}[m[2]]
		total += time.Duration(n) * unit
		rest = strings.TrimSpace(rest[len(m[0]):])
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", s)
	}
	if total > 365*24*time.Hour {
		return 0, fmt.Errorf("%q is longer than a year", s)
	}
	return total, nil
}
