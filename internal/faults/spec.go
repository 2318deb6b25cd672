package faults

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvVar is the environment variable a build with the faults tag reads
// its armed points from, once at start (Parse's format).
const EnvVar = "TOLLGATE_FAULTS"

// ErrInjected is what a point armed with fail returns (wrapped, naming
// the point). It exists in every build, so callers and tests can
// errors.Is it; only a build with the faults tag ever returns it.
var ErrInjected = errors.New("tollgate-faults: injected failure")

// MaxPause is the longest pause a point may be armed with.
const MaxPause = time.Minute

// Action is what an armed point does when it fires.
type Action string

// The actions.
const (
	Kill  Action = "kill"  // SIGKILL the process
	Pause Action = "pause" // sleep Arm.Pause, then go on
	Fail  Action = "fail"  // return an error wrapping ErrInjected
)

// Arm is how one point is armed: Action on its Hit-th hit (from 1), once.
type Arm struct {
	Action Action
	Pause  time.Duration // Pause's duration; zero for the others
	Hit    int
}

// String is a in Parse's format, without its point: "kill",
// "pause:1.5s@3" (@N left out for the first hit).
func (a Arm) String() string {
	s := string(a.Action)
	if a.Action == Pause {
		s += ":" + a.Pause.String()
	}
	if a.Hit != 1 {
		s += "@" + strconv.Itoa(a.Hit)
	}
	return s
}

// Format is armed in Parse's format, its points in order of name: what
// Parse reads back as armed.
func Format(armed map[Point]Arm) string {
	var b strings.Builder
	for i, p := range slices.Sorted(maps.Keys(armed)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(p) + "=" + armed[p].String())
	}
	return b.String()
}

// Parse reads a spec of armed points: entries point=action[@N] separated
// by commas (blanks around an entry are ignored), where point is one of
// All, action is kill, pause:DURATION (time.ParseDuration, more than zero
// and at most MaxPause) or fail, and N (at least 1, default 1) is the hit
// of the point the action fires on, once. An empty spec arms nothing. An
// unknown point, a bad action or N, a point armed twice or an empty entry
// is an error naming the entry.
func Parse(spec string) (map[Point]Arm, error) {
	armed := map[Point]Arm{}
	if strings.TrimSpace(spec) == "" {
		return armed, nil
	}
	for i, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		p, a, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("%s entry %d %q: %w", EnvVar, i+1, entry, err)
		}
		if _, dup := armed[p]; dup {
			return nil, fmt.Errorf("%s entry %d %q: point %s is armed twice", EnvVar, i+1, entry, p)
		}
		armed[p] = a
	}
	return armed, nil
}

func parseEntry(entry string) (Point, Arm, error) {
	if entry == "" {
		return "", Arm{}, errors.New("empty entry")
	}
	name, action, ok := strings.Cut(entry, "=")
	if !ok {
		return "", Arm{}, errors.New("want point=action[@N]")
	}
	p := Point(name)
	if !slices.Contains(All(), p) {
		return "", Arm{}, fmt.Errorf("unknown point %q (the points: %s)", name, known())
	}
	a := Arm{Hit: 1}
	action, n, hasN := strings.Cut(action, "@")
	if hasN {
		hit, err := strconv.Atoi(n)
		if err != nil || hit < 1 {
			return "", Arm{}, fmt.Errorf("bad hit %q: want a whole number, at least 1", n)
		}
		a.Hit = hit
	}
	kind, arg, hasArg := strings.Cut(action, ":")
	switch Action(kind) {
	case Kill, Fail:
		if hasArg {
			return "", Arm{}, fmt.Errorf("action %s takes no argument", kind)
		}
		a.Action = Action(kind)
	case Pause:
		if !hasArg {
			return "", Arm{}, errors.New("pause needs a duration: pause:DURATION")
		}
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 || d > MaxPause {
			return "", Arm{}, fmt.Errorf("bad pause %q: want a duration more than 0 and at most %s", arg, MaxPause)
		}
		a.Action, a.Pause = Pause, d
	default:
		return "", Arm{}, fmt.Errorf("unknown action %q: want kill, pause:DURATION or fail", action)
	}
	return p, a, nil
}

func known() string {
	var names []string
	for _, p := range All() {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}
