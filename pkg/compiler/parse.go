package compiler

import (
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// This file turns recipe text into a syntax tree. It knows the shape of each
// line; what the lines mean together (edges, gates, joins) is build.go's job.

type line struct {
	n      int    // file line number
	indent int    // leading whitespace, in characters (a tab counts as 2)
	text   string // without indentation and trailing space
	raw    string // the whole line, for columns
}

// col returns the 1-based column of byte offset off within l.text.
func (l line) col(off int) int {
	lead := len(l.raw) - len(strings.TrimLeft(l.raw, " \t"))
	if off > len(l.text) {
		off = len(l.text)
	}
	return utf8.RuneCountInString(l.raw[:lead]) + utf8.RuneCountInString(l.text[:off]) + 1
}

func (l line) pos(off int) Pos { return Pos{Line: l.n, Col: l.col(off)} }

type sectionKind int

const (
	secPlain sectionKind = iota // steps with no header (or after a closed fan)
	secFan                      // together NAME:
	secThen                     // then:
)

type srcRef struct {
	ref plan.Ref
	pos Pos
}

type srcStep struct {
	id      string
	pos     Pos
	line    line
	tool    bool
	server  string
	name    string // tool name
	toolPos Pos
	args    map[string]any
	argsPos Pos            // the args' opening brace
	keyPos  map[string]Pos // each top-level arg's key
	prompt  string
	refs    []srcRef // from args or prompt, in order

	withoutAsking bool
	onFail        string
	retry         int
	timeout       string
	on            string
	after         []srcRef
	modPos        Pos // first modifier, for messages
}

type section struct {
	kind       sectionKind
	name       string // fan name
	pos        Pos
	hdrIndent  int
	bodyIndent int // indentation of the first step; -1 before it
	steps      []*srcStep
	need       *needSpec
}

type needSpec struct {
	k, n int
	pos  Pos
}

type srcPhase struct {
	sections []*section
	ask      *srcAsk   // at most one; what follows it is rest
	rest     *srcPhase // the continuation after ask
}

type amendSpec struct {
	field    string
	min, max int64
	pos      Pos
}

type checkSpec struct {
	id     string
	server string
	tool   string
	args   map[string]any
	fields []string
	pos    Pos
}

type srcAsk struct {
	pos      Pos
	who      string // "me" or a role
	text     bool   // (text): a free-text question
	as       string
	asPos    Pos
	question []string
	summary  string
	show     []srcRef
	options  []string
	optPos   Pos

	expires, remindAfter, escalateAfter string
	onExpiry                            string
	onExpiryPos                         Pos
	escalateTo                          string
	approvers                           []string
	quorum                              int
	check                               *checkSpec
	amend                               []amendSpec
	ifNo                                *srcPhase
	ifNoPos                             Pos
}

var (
	identRe    = `[A-Za-z_][A-Za-z0-9_-]*`
	togetherRe = regexp.MustCompile(`^together\s+(` + identRe + `)\s*:\s*$`)
	thenRe     = regexp.MustCompile(`^then\s*:\s*$`)
	needRe     = regexp.MustCompile(`^need\s*:\s*(.*)$`)
	needValRe  = regexp.MustCompile(`^(\d+)\s+of\s+(\d+)$`)
	askRe      = regexp.MustCompile(`^ask\s+(` + identRe + `)(\s*\(\s*text\s*\))?(?:\s+as\s+(` + identRe + `))?\s*:\s*(.*)$`)
	stepRe     = regexp.MustCompile(`^(` + identRe + `)\s*:\s*(.*)$`)
	toolRe     = regexp.MustCompile(`^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)(?:\s|\{|$)`)
	settingRe  = regexp.MustCompile(`^(summary|show|options|expires|on expiry|remind after|escalate after|approvers|check|amend)\s*:\s*(.*)$`)
	ifNoRe     = regexp.MustCompile(`^(?:if|on)\s+no\s*:\s*$`)
	wordColon  = regexp.MustCompile(`^([a-z][a-z ]{1,20}?)\s*:`)
	modRe      = regexp.MustCompile(`^(without asking|on fail|retry|timeout|on|after)\b\s*:?\s*(.*)$`)
	checkRe    = regexp.MustCompile(`^(?:(` + identRe + `)\s*=\s*)?([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\s*(\{.*\})?\s*fields?\s+(.+)$`)
	amendRe    = regexp.MustCompile(`^(` + identRe + `)\s+between\s+(-?\d+)\s+and\s+(-?\d+)$`)
	quorumRe   = regexp.MustCompile(`^(\d+)\s+of\s+(.+)$`)
	escalateRe = regexp.MustCompile(`^(.+?)\s+to\s+(` + identRe + `)$`)
)

// reserved are words that start lines of their own; a step may not be
// named after one.
var reserved = map[string]bool{
	"then": true, "need": true, "together": true, "ask": true, "after": true,
	"retry": true, "timeout": true, "on": true, "if": true,
}

var settingNames = []string{"summary", "show", "options", "expires", "on expiry", "remind after", "escalate after", "approvers", "check", "amend"}

// Limits that keep compile time linear on hostile input (the API compiles
// what any caller sends).
const (
	MaxAskDepth = 64    // asks nested inside asks
	MaxSteps    = 10000 // steps in one recipe
)

type parser struct {
	lines   []line
	d       *diags
	depth   int // asks enclosing the phase being parsed
	steps   int
	stopped bool // a limit was hit; the rest is not parsed
}

func splitLines(body string, firstLine int) []line {
	raw := strings.Split(body, "\n")
	out := make([]line, 0, len(raw))
	for i, r := range raw {
		r = strings.TrimRight(r, " \t\r")
		trimmed := strings.TrimLeft(r, " \t")
		indent := 0
		for _, c := range r[:len(r)-len(trimmed)] {
			if c == '\t' {
				indent += 2
			} else {
				indent++
			}
		}
		out = append(out, line{n: firstLine + i, indent: indent, text: trimmed, raw: r})
	}
	return out
}

func blank(l line) bool { return l.text == "" || strings.HasPrefix(l.text, "#") }

// phase parses lines[i:end] as a phase: sections of steps, then at most one
// ask whose continuation is everything after it.
func (p *parser) phase(i, end int) *srcPhase {
	ph := &srcPhase{}
	cur := &section{kind: secPlain, bodyIndent: -1, hdrIndent: -1}
	ph.sections = append(ph.sections, cur)
	newSection := func(s *section) {
		cur = s
		ph.sections = append(ph.sections, s)
	}
	for i < end && !p.stopped {
		l := p.lines[i]
		if blank(l) {
			i++
			continue
		}
		t := l.text
		// Cheap prefix checks spare most lines the regexps.
		kw := t
		if i := strings.IndexAny(kw, " \t:("); i >= 0 {
			kw = kw[:i]
		}
		switch {
		case kw == "together" && togetherRe.MatchString(t):
			m := togetherRe.FindStringSubmatch(t)
			newSection(&section{kind: secFan, name: m[1], pos: l.pos(0), hdrIndent: l.indent, bodyIndent: -1})
			i++
		case kw == "then" && thenRe.MatchString(t):
			newSection(&section{kind: secThen, pos: l.pos(0), hdrIndent: l.indent, bodyIndent: -1})
			i++
		case kw == "need" && needRe.MatchString(t):
			m := needRe.FindStringSubmatch(t)
			val := strings.TrimSpace(m[1])
			nm := needValRe.FindStringSubmatch(val)
			switch {
			case nm == nil:
				p.d.errorf(l.pos(0), CodeSyntax, "`need:` takes `K of N`, such as `need: 2 of 3`; got %q", val)
			case cur.kind != secThen || len(cur.steps) > 0:
				p.d.errorf(l.pos(0), CodeSyntax, "`need:` belongs right under `then:`, before its steps; it sets how many steps of the fan above must succeed")
			case cur.need != nil:
				p.d.errorf(l.pos(0), CodeSyntax, "this `then:` already has a `need:` (line %d)", cur.need.pos.Line)
			default:
				k, _ := strconv.Atoi(nm[1])
				n, _ := strconv.Atoi(nm[2])
				cur.need = &needSpec{k: k, n: n, pos: l.pos(0)}
			}
			i++
		case kw == "ask":
			if p.depth >= MaxAskDepth {
				p.d.errorf(l.pos(0), CodeSyntax, "asks nest more than %d deep here; split the recipe into smaller skills", MaxAskDepth)
				p.stopped = true
				return ph
			}
			a, next := p.ask(i, end)
			ph.ask = a
			p.depth++
			ph.rest = p.phase(next, end)
			p.depth--
			return ph
		case stepRe.MatchString(t) && !strings.HasPrefix(t, "- "):
			// A fan or then: section written with indented steps ends at the
			// first step that is not indented under its header.
			if cur.kind != secPlain && cur.bodyIndent > cur.hdrIndent && l.indent <= cur.hdrIndent {
				newSection(&section{kind: secPlain, hdrIndent: -1, bodyIndent: -1})
			}
			if cur.bodyIndent < 0 {
				cur.bodyIndent = l.indent
			}
			if p.steps++; p.steps > MaxSteps {
				p.d.errorf(l.pos(0), CodeSyntax, "the recipe has more than %d steps; split it into smaller skills", MaxSteps)
				p.stopped = true
				return ph
			}
			s, next := p.step(i, end)
			if s != nil {
				cur.steps = append(cur.steps, s)
			}
			i = next
		default:
			if strings.HasPrefix(t, "- ") || t == "-" {
				p.d.errorf(l.pos(0), CodeSyntax, "this list item belongs to no ask: write the question under an `ask me:` line")
			} else {
				p.d.errorf(l.pos(0), CodeSyntax, "cannot read this line: expected a step (`ID: SERVER.TOOL {args}` or `ID: what to do`), `together NAME:`, `then:`, `need: K of N` or `ask me:`")
			}
			i++
		}
	}
	return ph
}

// step parses a step line and any modifier lines indented under it.
func (p *parser) step(i, end int) (*srcStep, int) {
	l := p.lines[i]
	m := stepRe.FindStringSubmatchIndex(l.text)
	id := l.text[m[2]:m[3]]
	restOff := m[4]
	rest := l.text[restOff:]
	s := &srcStep{id: id, pos: l.pos(0), line: l}
	if reserved[strings.ToLower(id)] {
		p.d.errorf(l.pos(0), CodeReservedID, "`%s` is a word of the recipe language; name the step something else", id)
	}
	if tm := toolRe.FindStringSubmatchIndex(rest); tm != nil {
		s.tool = true
		s.server = rest[tm[2]:tm[3]]
		s.name = rest[tm[4]:tm[5]]
		s.toolPos = l.pos(restOff)
		after := rest[tm[5]:]
		afterOff := restOff + tm[5]
		trimmed := strings.TrimLeft(after, " \t")
		afterOff += len(after) - len(trimmed)
		mods := ""
		modOff := afterOff
		switch {
		case strings.HasPrefix(trimmed, "{"):
			args, n, err := decodeArgs(trimmed)
			if err != nil {
				p.d.errorf(l.pos(afterOff+n), CodeBadArgs, "the args of `%s` are not a JSON object: %s", id, err)
				s.args = map[string]any{}
			} else {
				s.args = args
				s.argsPos = l.pos(afterOff)
				s.keyPos = map[string]Pos{}
				for k, off := range keyOffsets(trimmed[:n]) {
					s.keyPos[k] = l.pos(afterOff + off)
				}
				// References live in the decoded string values (so an escaped
				// brace cannot hide one); the raw text only gives positions.
				raw := trimmed[:n]
				for _, r := range plan.ArgRefs(args) {
					off := strings.Index(raw, "{"+r.String())
					if off < 0 {
						off = 0
					}
					s.refs = append(s.refs, srcRef{ref: r, pos: l.pos(afterOff + off)})
				}
			}
			mods = trimmed[n:]
			modOff = afterOff + n
		case trimmed == "":
			s.args = map[string]any{}
		default:
			// No args, only modifiers (e.g. "without asking"), or junk.
			s.args = map[string]any{}
			mods = trimmed
		}
		for _, part := range strings.Split(mods, ";") {
			off := modOff + strings.Index(mods, part)
			modOff2 := off + len(part) - len(strings.TrimLeft(part, " \t"))
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if !p.modifier(s, part, l.pos(modOff2)) {
				p.d.errorf(l.pos(modOff2), CodeBadArgs, "unexpected %q after the tool of `%s`: args are one JSON object such as {\"key\": \"value\"}, and modifiers are separated by `;`", part, id)
			}
		}
	} else {
		s.prompt = strings.TrimSpace(rest)
		if s.prompt == "" {
			p.d.errorf(l.pos(0), CodeSyntax, "step `%s` says nothing to do: write `%s: SERVER.TOOL {args}` or `%s: what to do, in words`", id, id, id)
		}
		for _, sp := range plan.ScanRefs(rest) {
			for _, r := range sp.Refs {
				s.refs = append(s.refs, srcRef{ref: r, pos: l.pos(restOff + sp.Start)})
			}
		}
	}
	i++
	// Modifier lines: indented deeper than the step and starting with a
	// modifier word.
	for i < end {
		ml := p.lines[i]
		if blank(ml) {
			i++
			continue
		}
		t := strings.TrimPrefix(ml.text, "- ")
		if ml.indent <= l.indent || !modRe.MatchString(t) {
			break
		}
		if !p.modifier(s, t, ml.pos(0)) {
			break
		}
		i++
	}
	return s, i
}

// modifier applies one step modifier; it reports false when text is not one.
func (p *parser) modifier(s *srcStep, text string, pos Pos) bool {
	m := modRe.FindStringSubmatch(text)
	if m == nil {
		return false
	}
	if s.modPos == (Pos{}) {
		s.modPos = pos
	}
	val := strings.TrimSpace(m[2])
	switch m[1] {
	case "without asking":
		if val != "" {
			return false
		}
		s.withoutAsking = true
	case "on fail":
		if val != "skip" && val != "stop" {
			p.d.errorf(pos, CodeSyntax, "`on fail:` is `skip` or `stop`; got %q", val)
		}
		s.onFail = val
	case "retry":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > 10 {
			p.d.errorf(pos, CodeSyntax, "`retry:` takes a whole number from 0 to 10; got %q", val)
		}
		s.retry = n
	case "timeout":
		d, err := parseDuration(val)
		if err != nil {
			p.d.errorf(pos, CodeBadDuration, "`timeout:` of `%s`: %v", s.id, err)
		} else {
			s.timeout = plan.FormatDuration(d)
		}
	case "on":
		if val == "" || strings.ContainsAny(val, " \t,") {
			p.d.errorf(pos, CodeSyntax, "`on:` takes one executor label, such as `on: edge-1`; got %q", val)
		}
		s.on = val
	case "after":
		for _, part := range strings.FieldsFunc(val, func(r rune) bool { return r == ',' || r == ' ' }) {
			s.after = append(s.after, srcRef{ref: plan.Ref{ID: part}, pos: pos})
		}
		if len(s.after) == 0 {
			p.d.errorf(pos, CodeSyntax, "`after:` names the steps to wait for, such as `after: fetch`")
		}
	}
	return true
}

// decodeArgs reads one JSON object at the start of s and returns it with the
// number of bytes it used. On error the count is the offset of the fault.
func decodeArgs(s string) (map[string]any, int, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, int(se.Offset) - 1, errors.New(strings.TrimPrefix(se.Error(), "json: "))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, len(s), errors.New("the object is never closed with }")
		}
		return nil, 0, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, 0, errors.New("args must be an object in braces")
	}
	return m, int(dec.InputOffset()), nil
}

// keyOffsets finds the byte offset of each top-level key's opening quote
// in raw, a JSON object that decodeArgs accepted (for diagnostics on one
// arg). A repeated key keeps its last offset, as decoding keeps its value.
func keyOffsets(raw string) map[string]int {
	out := map[string]int{}
	dec := json.NewDecoder(strings.NewReader(raw))
	depth, wantKey := 0, false
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				depth++
				wantKey = depth == 1 && v == '{'
			default:
				depth--
				wantKey = depth == 1
			}
			continue
		case string:
			if depth == 1 && wantKey {
				off := before + strings.IndexByte(raw[before:], '"')
				out[v] = off
				wantKey = false
				continue
			}
		}
		// A value at depth 1 ends; the next token there is a key.
		wantKey = depth == 1
	}
}

// canonicalArgs encodes args as canonical JSON (sorted keys, numbers as
// written).
func canonicalArgs(args map[string]any) plan.Object {
	return plan.AppendCanonical(nil, args)
}
