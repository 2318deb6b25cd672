package plan

import (
	"bytes"
	"unicode/utf8"
)

// canonicalScan walks raw, which should be one JSON object, without
// decoding it. It reports true only when raw is already in canonical form
// with no escapes at all: compact, keys sorted and unique at every level,
// every string free of backslashes and control bytes, valid UTF-8. Then,
// and only then, each string value (not key) has been passed to onString.
// Anything else reports false, and the caller takes the decoding path; so
// this is a fast path, never a second definition of JSON.
func canonicalScan(raw []byte, onString func(string)) bool {
	if !utf8.Valid(raw) || bytes.IndexByte(raw, '\\') >= 0 {
		return false
	}
	s := &scanner{b: raw, on: onString}
	if !s.object() {
		return false
	}
	return s.i == len(s.b)
}

type scanner struct {
	b  []byte
	i  int
	on func(string)
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str reads a string without escapes and returns its contents.
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		c := s.b[j]
		if c < 0x20 {
			return "", false
		}
		if c == '"' {
			s.i = j + 1
			return string(s.b[start:j]), true
		}
	}
	return "", false
}

func (s *scanner) object() bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	prev := ""
	for first := true; ; first = false {
		k, ok := s.str()
		if !ok || (!first && k <= prev) {
			return false
		}
		prev = k
		if s.peek() != ':' {
			return false
		}
		s.i++
		if !s.value() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) array() bool {
	s.i++ // [
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !s.value() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) value() bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		v, ok := s.str()
		if ok && s.on != nil {
			s.on(v)
		}
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *scanner) lit(w string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		s.i += len(w)
		return true
	}
	return false
}

// number accepts exactly the JSON number grammar.
func (s *scanner) number() bool {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	switch {
	case s.peek() == '0':
		s.i++
	case s.peek() >= '1' && s.peek() <= '9':
		for s.peek() >= '0' && s.peek() <= '9' {
			s.i++
		}
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !(s.peek() >= '0' && s.peek() <= '9') {
			return false
		}
		for s.peek() >= '0' && s.peek() <= '9' {
			s.i++
		}
	}
	if s.peek() == 'e' || s.peek() == 'E' {
		s.i++
		if s.peek() == '+' || s.peek() == '-' {
			s.i++
		}
		if !(s.peek() >= '0' && s.peek() <= '9') {
			return false
		}
		for s.peek() >= '0' && s.peek() <= '9' {
			s.i++
		}
	}
	return s.i > start
}
