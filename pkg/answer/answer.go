package answer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is the typed outcome of a reply. Callers switch on it.
type Kind string

// Reply kinds.
const (
	Selected   Kind = "SELECTED"    // an option was chosen, or a free-text answer given
	Reshown    Kind = "RESHOWN"     // "menu"/"options": the ask is shown again; stays parked, no scold
	NoMatch    Kind = "NO_MATCH"    // not an answer; stays parked
	EscapeHint Kind = "ESCAPE_HINT" // not an answer, and the MissesBeforeEscapeHint-th+ consecutive miss; Message names the exits
	Dropped    Kind = "DROPPED"     // a drop word: the caller cancels the run and closes its asks
)

// StaysParked reports whether the ask is still waiting for an answer after a
// reply of this kind (true for Reshown, NoMatch and EscapeHint).
func (k Kind) StaysParked() bool {
	switch k {
	case Reshown, NoMatch, EscapeHint:
		return true
	}
	return false
}

// MissesBeforeEscapeHint is the number of consecutive misses from which the
// response changes to EscapeHint.
const MissesBeforeEscapeHint = 3

// Option is one choice of an ask.
type Option struct {
	ID    string
	Label string
}

// Ask is the part of a parked ask that a text reply is matched against.
type Ask struct {
	Title    string
	Options  []Option // the numbered choices; empty for a plain free-text question
	FreeText bool     // any non-control, non-empty reply is the answer
}

// Reply is the interpretation of one reply.
type Reply struct {
	Kind    Kind
	Option  Option // when Selected by number or label
	Text    string // when Selected with a free-text answer: the reply as typed, trimmed
	Misses  int    // the consecutive-miss count to store after this reply (>= 0)
	Message string // never empty: what the surface shows the user
}

// Control words, normalised (lower case, no slash).
var (
	menuWords = []string{"menu", "options"}
	dropWords = []string{"cancel", "exit", "quit", "stop", "nevermind"}
)

// Match interprets text as a reply to a, given the consecutive misses stored
// so far (a negative count is taken as 0). See the package documentation for
// the rules.
func Match(a Ask, text string, misses int) Reply {
	if misses < 0 {
		misses = 0
	}
	trimmed := strings.TrimSpace(text)
	slashed := strings.HasPrefix(trimmed, "/")
	norm := normalize(trimmed)

	if norm == "" {
		return miss(a, misses, false)
	}

	// An option beats a control word.
	i, n := lookup(a, norm)
	if n == 1 {
		return Reply{Kind: Selected, Option: a.Options[i], Misses: 0, Message: selectedMessage(i, a.Options[i])}
	}
	ambiguous := n > 1

	// In a free-text ask only the slash forms are control words.
	if !ambiguous && (slashed || !a.FreeText) {
		switch {
		case isWord(norm, menuWords):
			return Reply{Kind: Reshown, Misses: misses, Message: Menu(a)}
		case isWord(norm, dropWords):
			return Reply{Kind: Dropped, Misses: 0, Message: droppedMessage(a)}
		}
	}

	if a.FreeText && !ambiguous {
		return Reply{Kind: Selected, Text: trimmed, Misses: 0, Message: msgAnswerReceived}
	}
	return miss(a, misses, ambiguous)
}

// Menu renders the ask as a numbered menu: the title, then one indented
// "N) label" line per option, e.g. "save this reading?\n  1) Yes\n  2) No".
// A free-text ask gets a last line inviting the answer. Menu never returns
// an empty string.
func Menu(a Ask) string {
	var b strings.Builder
	line := func(s string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	if strings.TrimSpace(a.Title) != "" {
		line(a.Title)
	}
	for i, o := range a.Options {
		line(fmt.Sprintf("  %d) %s", i+1, o.Label))
	}
	switch {
	case a.FreeText && len(a.Options) > 0:
		line("  or type your own answer")
	case a.FreeText:
		line("  (type your answer)")
	case len(a.Options) == 0:
		line("  (no options)")
	}
	return b.String()
}

// normalize trims, strips one leading slash, collapses inner white space and
// folds case.
func normalize(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "/")
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// lookup finds the options that norm selects: by number first, then by
// label. It returns the index of the first match and how many matched.
func lookup(a Ask, norm string) (index, count int) {
	if k, ok := optionNumber(norm, len(a.Options)); ok {
		return k - 1, 1
	}
	index = -1
	for i, o := range a.Options {
		if l := normalize(o.Label); l != "" && strings.EqualFold(l, norm) {
			if count == 0 {
				index = i
			}
			count++
		}
	}
	return index, count
}

// optionNumber parses s as an option number written the way Menu writes it:
// ASCII digits, no sign, no leading zero, in 1..n.
func optionNumber(s string, n int) (int, bool) {
	if s == "" || len(s) > 9 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 || k > n {
		return 0, false
	}
	return k, true
}

func isWord(norm string, words []string) bool {
	for _, w := range words {
		if strings.EqualFold(norm, w) {
			return true
		}
	}
	return false
}

// miss counts one more miss and picks the response for it.
func miss(a Ask, misses int, ambiguous bool) Reply {
	if misses < math.MaxInt {
		misses++
	}
	if misses >= MissesBeforeEscapeHint {
		return Reply{Kind: EscapeHint, Misses: misses, Message: escapeHintMessage(a, misses)}
	}
	return Reply{Kind: NoMatch, Misses: misses, Message: noMatchMessage(a, ambiguous)}
}

// Messages. They are written here only; callers never compare them.
const (
	msgAnswerReceived = "Answer received."
	msgEmptyFreeText  = "Nothing was typed. Type your answer."
	msgAmbiguous      = "That label matches more than one option. Reply with the option's number instead."
	msgNoOptions      = "That is not an answer, and this ask has no options to choose from."
)

func selectedMessage(i int, o Option) string {
	return fmt.Sprintf("Selected %d) %s.", i+1, o.Label)
}

func noMatchMessage(a Ask, ambiguous bool) string {
	n := len(a.Options)
	switch {
	case ambiguous:
		return msgAmbiguous
	case a.FreeText:
		return msgEmptyFreeText
	case n == 0:
		return msgNoOptions
	case n == 1:
		return "That did not match any option. Reply with 1 or the option's exact label."
	default:
		return fmt.Sprintf("That did not match any option. Reply with a number from 1 to %d or an option's exact label.", n)
	}
}

func droppedMessage(a Ask) string {
	if a.FreeText {
		return "Dropped the run. No answer was given to this ask, so nothing waiting on it ran."
	}
	return "Dropped the run. No option was chosen, so nothing waiting on this ask ran."
}

// escapeHintMessage names the ways out of this ask: choosing, re-showing,
// dropping. It offers only words that work here: a control word that an
// option label shadows is replaced by the next free one, or left out.
func escapeHintMessage(a Ask, misses int) string {
	prefix := ""
	if a.FreeText {
		prefix = "/" // bare control words are answers in a free-text ask
	}
	var parts []string
	switch {
	case a.FreeText && len(a.Options) > 0:
		parts = append(parts, "type a number, a label or your own answer")
	case a.FreeText:
		parts = append(parts, "type your answer")
	case len(a.Options) > 0:
		parts = append(parts, "type a number or a label to choose an option")
	}
	what := "the options"
	if a.FreeText && len(a.Options) == 0 {
		what = "the question"
	}
	if w := freeWord(a, menuWords); w != "" {
		parts = append(parts, fmt.Sprintf("%q to see %s again", prefix+w, what))
	}
	if w := freeWord(a, dropWords); w != "" {
		parts = append(parts, fmt.Sprintf("%q to drop the run", prefix+w))
	}

	head := fmt.Sprintf("Still no match (%d tries).", misses)
	if a.FreeText {
		head = fmt.Sprintf("Still no answer (%d tries).", misses)
	}
	return head + " " + sentence(parts) + "\n" + Menu(a)
}

// freeWord returns the first of words that no option shadows, or "".
func freeWord(a Ask, words []string) string {
	for _, w := range words {
		if _, n := lookup(a, w); n == 0 {
			return w
		}
	}
	return ""
}

// sentence joins parts as "A, B, or C." with a capital first letter.
// parts is never empty: an ask with no options shadows no control word.
func sentence(parts []string) string {
	var s string
	switch len(parts) {
	case 1:
		s = parts[0]
	case 2:
		s = parts[0] + " or " + parts[1]
	default:
		s = strings.Join(parts[:len(parts)-1], ", ") + ", or " + parts[len(parts)-1]
	}
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:] + "."
}
