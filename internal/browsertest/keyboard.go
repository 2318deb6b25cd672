package browsertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// press sends keys (chromedp's kb notation) to the focused element.
func press(t testing.TB, ctx context.Context, what, keys string, n int, opts ...chromedp.KeyOption) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	for i := range n {
		if err := chromedp.Do(tctx, chromedp.KeyEvent(keys, opts...)); err != nil {
			fatal(t, ctx, "%s (key %d of %d): %v", what, i+1, n, wrapErr(err))
		}
	}
}

// Tab presses Tab n times, moving the focus forward as a keyboard user
// does.
func Tab(t testing.TB, ctx context.Context, n int) {
	t.Helper()
	press(t, ctx, fmt.Sprintf("Tab(%d)", n), kb.Tab, n)
}

// ShiftTab presses Shift+Tab n times, moving the focus backward.
func ShiftTab(t testing.TB, ctx context.Context, n int) {
	t.Helper()
	press(t, ctx, fmt.Sprintf("ShiftTab(%d)", n), kb.Tab, n, chromedp.KeyModifiers(chromedp.ModifierShift))
}

// PressEnter presses Enter on the focused element (it follows a link,
// presses a button, submits a form from a field). It does not wait for a
// navigation: wrap it in ExpectNavigation for that.
func PressEnter(t testing.TB, ctx context.Context) {
	t.Helper()
	press(t, ctx, "PressEnter", kb.Enter, 1)
}

// PressSpace presses Space on the focused element (it presses a button,
// toggles a checkbox). It does not wait for a navigation: wrap it in
// ExpectNavigation for that.
func PressSpace(t testing.TB, ctx context.Context) {
	t.Helper()
	press(t, ctx, "PressSpace", " ", 1)
}

// Focus describes the focused element.
type Focus struct {
	Tag  string // lower case: "button", "input", "a"; "body" when nothing has the focus
	ID   string // its id attribute, if any
	Name string // its accessible name, as Chromium computes it for screen readers
	Role string // its accessible role ("button", "textbox", "link")
}

// String returns the id if there is one, else the accessible name, else the
// tag: what Focused returns.
func (f Focus) String() string {
	switch {
	case f.ID != "":
		return f.ID
	case f.Name != "":
		return f.Name
	default:
		return f.Tag
	}
}

// Focused returns the focused element's id, or else its accessible name,
// or else its tag (see FocusedElement for all three).
func Focused(t testing.TB, ctx context.Context) string {
	t.Helper()
	return FocusedElement(t, ctx).String()
}

// FocusedElement describes document.activeElement, with the accessible
// name and role from Chromium's accessibility tree.
func FocusedElement(t testing.TB, ctx context.Context) Focus {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	f, err := chromedp.Run(tctx, focused)
	if err != nil {
		fatal(t, ctx, "FocusedElement: %v", wrapErr(err))
	}
	return f
}

func focused(ctx context.Context, tgt *chromedp.Target) (Focus, error) {
	var f Focus
	const group = "browsertest-focus"
	defer func() {
		_, _ = chromedp.Call(ctx, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: group})
	}()
	obj, err := chromedp.Evaluate[*runtime.RemoteObject](`document.activeElement || document.body`, chromedp.EvalObjectGroup(group))(ctx, tgt)
	if err != nil {
		return f, err
	}
	if obj == nil || obj.ObjectID == "" {
		return f, fmt.Errorf("the document has no active element")
	}
	type tagID struct {
		Tag string `json:"tag"`
		ID  string `json:"id"`
	}
	ti, err := chromedp.CallFunctionOn[tagID](`function() { return {tag: this.tagName.toLowerCase(), id: this.id || ""}; }`,
		func(p *runtime.CallFunctionOnParams) { p.ObjectID = obj.ObjectID })(ctx, tgt)
	if err != nil {
		return f, err
	}
	f.Tag, f.ID = ti.Tag, ti.ID
	no := false
	ax, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{ObjectID: obj.ObjectID, FetchRelatives: &no})
	if err != nil {
		return f, fmt.Errorf("the accessibility tree of <%s>: %w", f.Tag, err)
	}
	if len(ax.Nodes) > 0 {
		n := ax.Nodes[0]
		f.Name = axString(n.Name)
		f.Role = axString(n.Role)
	}
	return f, nil
}

// axString returns an accessibility value that is a string, or "".
func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if err := unmarshalJSON(v.Value, &s); err != nil {
		return ""
	}
	return s
}

// TypeKeys types keys into the focused element as key events, as a
// keyboard user does ("\n" is Enter, kb.Tab Tab: chromedp's kb notation).
func TypeKeys(t testing.TB, ctx context.Context, keys string) {
	t.Helper()
	press(t, ctx, fmt.Sprintf("TypeKeys(%q)", keys), keys, 1)
}
