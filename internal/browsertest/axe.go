package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// Violation is one axe-core rule that failed on the page.
type Violation struct {
	ID          string          `json:"id"`     // the rule, e.g. "label", "color-contrast"
	Impact      string          `json:"impact"` // "minor", "moderate", "serious" or "critical"
	Help        string          `json:"help"`
	HelpURL     string          `json:"helpUrl"`
	Description string          `json:"description"`
	Nodes       []ViolationNode `json:"nodes"`
}

// ViolationNode is one element a Violation found.
type ViolationNode struct {
	// Target is the element's CSS selector path; an element inside an
	// iframe or a shadow root has one selector per level.
	Target         []string `json:"target"`
	HTML           string   `json:"html"`
	FailureSummary string   `json:"failureSummary"`
}

// Serious reports whether the impact is serious or critical.
func (v Violation) Serious() bool { return v.Impact == "serious" || v.Impact == "critical" }

// String formats v on several lines: the rule, its impact and help, and
// each element with what to fix.
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s [%s]", v.ID, v.Impact, v.Help, v.HelpURL)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "\n  %s  %s", strings.Join(n.Target, " "), trimHTML(n.HTML, 200))
		for _, line := range strings.Split(strings.TrimSpace(n.FailureSummary), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				fmt.Fprintf(&b, "\n    %s", line)
			}
		}
	}
	return b.String()
}

var axeSource struct {
	once sync.Once
	src  string
	err  error
}

// axeJS returns the content of axe.min.js, read once.
func axeJS() (string, error) {
	axeSource.once.Do(func() {
		p, err := AxePath()
		if err != nil {
			axeSource.err = err
			return
		}
		b, err := os.ReadFile(p)
		axeSource.src, axeSource.err = string(b), err
	})
	return axeSource.src, axeSource.err
}

// axeRunJS runs axe on the document and keeps what Violation has.
const axeRunJS = `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations.map(v => ({
	id: v.id, impact: v.impact || "", help: v.help, helpUrl: v.helpUrl, description: v.description,
	nodes: v.nodes.map(n => ({
		target: n.target.map(x => Array.isArray(x) ? x.join(" >>> ") : String(x)),
		html: n.html, failureSummary: n.failureSummary || "",
	})),
})))`

// Axe runs axe-core (every rule it runs by default: WCAG 2.x A and AA and
// its best practices) on the tab's document and returns the violations. It
// injects axe.min.js with Runtime.evaluate, which a Content-Security-Policy
// does not block, so the page needs no script of its own. Without axe-core
// the test skips, or under CI=true fails (see AxePath).
func Axe(t testing.TB, ctx context.Context) []Violation {
	t.Helper()
	src := need(t, axeJS, ErrNoAxe)
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	loaded, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`typeof window.axe === "object" && typeof window.axe.run === "function"`))
	if err != nil {
		fatal(t, ctx, "Axe: %v", wrapErr(err))
	}
	if !loaded {
		if err := chromedp.Do(tctx, chromedp.Evaluate[chromedp.Void](src)); err != nil {
			fatal(t, ctx, "Axe: injecting axe.min.js: %v", wrapErr(err))
		}
	}
	vs, err := chromedp.Run(tctx, chromedp.Evaluate[[]Violation](axeRunJS, chromedp.EvalAwaitPromise))
	if err != nil {
		fatal(t, ctx, "Axe: axe.run: %v", wrapErr(err))
	}
	return vs
}

// RequireNoSeriousAxe runs Axe and fails t when a violation is serious or
// critical, printing each; it logs the others (minor, moderate).
func RequireNoSeriousAxe(t testing.TB, ctx context.Context) {
	t.Helper()
	var serious, other []string
	for _, v := range Axe(t, ctx) {
		if v.Serious() {
			serious = append(serious, v.String())
		} else {
			other = append(other, v.String())
		}
	}
	if len(other) > 0 {
		t.Logf("browsertest: axe: %d minor or moderate violation(s) on %s:\n%s", len(other), Location(t, ctx), strings.Join(other, "\n"))
	}
	if len(serious) > 0 {
		t.Fatalf("browsertest: axe: %d serious or critical violation(s) on %s:\n%s", len(serious), Location(t, ctx), strings.Join(serious, "\n"))
	}
}

// unmarshalJSON decodes a protocol JSON value.
func unmarshalJSON(v []byte, dst any) error { return json.Unmarshal(v, dst) }
