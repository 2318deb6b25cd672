package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// field describes one field of a cron expression, for checking it before
// robfig/cron parses it and for saying what is wrong in a person's words.
type field struct {
	name     string
	min, max int
	names    map[string]int // month and weekday names, lower case
	question bool           // "?" is allowed (day-of-month and day-of-week)
	hint     string         // added to an out-of-range message
}

var (
	secondField = field{name: "second", min: 0, max: 59}
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31, question: true}
	monthField  = field{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	dowField = field{name: "day-of-week", min: 0, max: 6, question: true,
		hint: " (Sunday is 0; 7 is not accepted)",
		names: map[string]int{
			"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
		}}
)

// fiveFields and sixFields are the layouts Parse accepts.
var (
	fiveFields = []field{minuteField, hourField, domField, monthField, dowField}
	sixFields  = []field{secondField, minuteField, hourField, domField, monthField, dowField}
)

// check validates one field against the grammar robfig/cron accepts, a
// little stricter where robfig is silently lenient (an empty list item,
// "*-5", signs on numbers, a step longer than the field's range), so that
// every expression that passes is parsed by robfig to what it says.
func (f field) check(s string) error {
	if s == "" {
		return f.errorf(s, "is empty")
	}
	for _, item := range strings.Split(s, ",") {
		if err := f.checkItem(s, item); err != nil {
			return err
		}
	}
	return nil
}

func (f field) checkItem(whole, item string) error {
	if item == "" {
		return f.errorf(whole, "has an empty list item (two commas, or a comma at an end)")
	}
	rng, step, hasStep := strings.Cut(item, "/")
	if hasStep {
		if strings.Contains(step, "/") {
			return f.errorf(whole, "has more than one / in %q", item)
		}
		n, ok := number(step)
		if !ok {
			return f.errorf(whole, "has step %q, which is not a whole number", step)
		}
		if n < 1 {
			return f.errorf(whole, "has step %d; a step must be at least 1", n)
		}
		if span := f.max - f.min + 1; n > span {
			return f.errorf(whole, "has step %d, longer than the field's range %d-%d", n, f.min, f.max)
		}
	}
	if rng == "*" || rng == "?" {
		if rng == "?" && !f.question {
			return f.errorf(whole, "uses ?, which only day-of-month and day-of-week accept; use *")
		}
		return nil
	}
	lo, hi, isRange := strings.Cut(rng, "-")
	if isRange && strings.Contains(hi, "-") {
		return f.errorf(whole, "has more than one - in %q", item)
	}
	a, err := f.value(whole, lo)
	if err != nil {
		return err
	}
	if !isRange {
		return nil
	}
	b, err := f.value(whole, hi)
	if err != nil {
		return err
	}
	if a > b {
		return f.errorf(whole, "has range %s, which runs backwards (ranges do not wrap around; write %s-%d,%d-%s)",
			rng, lo, f.max, f.min, hi)
	}
	return nil
}

// value parses a number or (for month and day-of-week) a three-letter
// name, and checks it is within the field's bounds.
func (f field) value(whole, s string) (int, error) {
	if n, ok := f.names[strings.ToLower(s)]; ok {
		return n, nil
	}
	n, ok := number(s)
	if !ok {
		if s == "" {
			return 0, f.errorf(whole, "has a range with a missing end (negative numbers are not allowed)")
		}
		if s == "*" || s == "?" {
			return 0, f.errorf(whole, "uses %s inside a range; %s stands alone (optionally with a /step)", s, s)
		}
		if f.names != nil {
			return 0, f.errorf(whole, "has %q, which is neither a number nor a %s name (%s)", s, f.name, f.nameList())
		}
		return 0, f.errorf(whole, "has %q, which is not a whole number", s)
	}
	if n < f.min || n > f.max {
		return 0, f.errorf(whole, "has %d, outside the range %d-%d%s", n, f.min, f.max, f.hint)
	}
	return n, nil
}

func (f field) nameList() string {
	if f.max == 12 {
		return "jan-dec"
	}
	return "sun-sat"
}

func (f field) errorf(whole, format string, args ...any) error {
	return fmt.Errorf("%s field %q %s", f.name, whole, fmt.Sprintf(format, args...))
}

// number parses a plain decimal number (digits only, at most 9 of them, so
// that no sign, space or overflow slips through).
func number(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
