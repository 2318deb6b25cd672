package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
)

// maxHTML bounds the outerHTML a failure prints.
const maxHTML = 3000

// withTimeout returns ctx bounded by DefaultTimeout.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, DefaultTimeout)
}

// fatal fails t with msg and the page's state.
func fatal(t testing.TB, ctx context.Context, format string, args ...any) {
	t.Helper()
	t.Fatalf("browsertest: "+format+"\n%s", append(args, PageState(ctx))...)
}

// wrapErr says what a context error means for a helper.
func wrapErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out: %w", err)
	}
	return err
}

// PageState describes the tab for a failure message: its URL, the status
// of its last document response and its outerHTML, whitespace collapsed
// and trimmed to a few KB. It never fails: what it cannot read, it says.
func PageState(ctx context.Context) string {
	var b strings.Builder
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "(the tab's context has ended: no page state)"
	}
	url, err := chromedp.Run(sctx, chromedp.Location())
	if err != nil {
		fmt.Fprintf(&b, "page URL: unknown (%v)", err)
	} else {
		fmt.Fprintf(&b, "page URL: %s", url)
	}
	if tb := tabOf(ctx); tb != nil {
		tb.mu.Lock()
		if tb.status != 0 {
			fmt.Fprintf(&b, " (last document response: %d for %s)", tb.status, tb.url)
		}
		tb.mu.Unlock()
	}
	html, err := chromedp.Run(sctx, chromedp.Evaluate[string](`document.documentElement ? document.documentElement.outerHTML : ""`))
	if err != nil {
		fmt.Fprintf(&b, "\nouterHTML: unknown (%v)", err)
	} else {
		fmt.Fprintf(&b, "\nouterHTML: %s", trimHTML(html, maxHTML))
	}
	return b.String()
}

// trimHTML collapses runs of whitespace and keeps the first n bytes.
func trimHTML(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }

// jsString returns s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Navigate loads url in the tab, waits for its load event and returns the
// HTTP status of the document (0 for a URL without one, like about:blank).
// A 4xx or 5xx status is not a failure: check it. A network error is.
func Navigate(t testing.TB, ctx context.Context, url string) int {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := chromedp.Run(tctx, chromedp.NavigateResponse(url))
	if err != nil {
		fatal(t, ctx, "Navigate(%q): %v", url, wrapErr(err))
	}
	if resp == nil {
		return 0
	}
	return int(resp.Status)
}

// ExpectNavigation runs trigger (which clicks, submits or presses a key
// with this package's helpers), waits until the navigation it starts has
// loaded, and returns the document's HTTP status (after redirects: a
// POST answered with 303 and a GET gives the GET's). It fails when no
// navigation loads in time.
func ExpectNavigation(t testing.TB, ctx context.Context, trigger func()) int {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := chromedp.RunResponse(tctx, chromedp.Func(func(context.Context, *chromedp.Target) error {
		trigger()
		return nil
	}))
	if err != nil {
		fatal(t, ctx, "ExpectNavigation: no navigation loaded (a form that failed validation does not submit): %v", wrapErr(err))
	}
	if resp == nil {
		return 0
	}
	return int(resp.Status)
}

// LastStatus returns the HTTP status of the tab's last main-frame document
// response, whatever caused it (Navigate, a link, a form); 0 before any.
func LastStatus(t testing.TB, ctx context.Context) int {
	t.Helper()
	tb := tabOf(ctx)
	if tb == nil {
		t.Fatalf("browsertest: LastStatus: ctx is not a context from Browser.NewTab")
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return int(tb.status)
}

// Location returns the tab's URL.
func Location(t testing.TB, ctx context.Context) string {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	u, err := chromedp.Run(tctx, chromedp.Location())
	if err != nil {
		fatal(t, ctx, "Location: %v", wrapErr(err))
	}
	return u
}

// Title returns the document's title.
func Title(t testing.TB, ctx context.Context) string {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.Title())
	if err != nil {
		fatal(t, ctx, "Title: %v", wrapErr(err))
	}
	return s
}

// Text waits for the first element that matches sel and returns its
// rendered text (innerText: what a user sees, hidden parts left out).
func Text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		fatal(t, ctx, "Text(%q): %v", sel, wrapErr(err))
	}
	return s
}

// Value waits for the first element that matches sel (an input, a select,
// a textarea) and returns its value.
func Value(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		fatal(t, ctx, "Value(%q): %v", sel, wrapErr(err))
	}
	return s
}

// Attr waits for the first element that matches sel and returns its
// attribute name, and whether it has it.
func Attr(t testing.TB, ctx context.Context, sel, name string) (string, bool) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	r, err := chromedp.Run(tctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil {
		fatal(t, ctx, "Attr(%q, %q): %v", sel, name, wrapErr(err))
	}
	return r.Value, r.Exists
}

// Count returns how many elements match sel now, without waiting: use it
// to check that something is absent (Count(...) == 0).
func Count(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	n, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
	if err != nil {
		fatal(t, ctx, "Count(%q): %v", sel, wrapErr(err))
	}
	return n
}

// WaitVisible waits until the first element that matches sel is visible
// (it has a box).
func WaitVisible(t testing.TB, ctx context.Context, sel string) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		fatal(t, ctx, "WaitVisible(%q): %v", sel, wrapErr(err))
	}
}

// WaitNotPresent waits until no element matches sel.
func WaitNotPresent(t testing.TB, ctx context.Context, sel string) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.WaitNotPresent(chromedp.CSS(sel))); err != nil {
		fatal(t, ctx, "WaitNotPresent(%q): %v", sel, wrapErr(err))
	}
}

// waitTextJS is the predicate of WaitText: the first match's innerText
// when it contains the substring, else false. It is re-run on each DOM
// mutation (chromedp.WithPollingMutation), not on a timer.
const waitTextJS = `(sel, sub) => {
	const el = document.querySelector(sel);
	if (!el) return false;
	const text = el.innerText;
	return text.includes(sub) ? text : false;
}`

// WaitText waits until the first element that matches sel has a rendered
// text containing substr (for a page that changes by itself, such as a
// live update over EventSource), and returns that text. A navigation while
// it waits is followed: it waits again on the new document.
func WaitText(t testing.TB, ctx context.Context, sel, substr string) string {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	begin := time.Now()
	for {
		wait := DefaultTimeout
		if d, ok := tctx.Deadline(); ok {
			wait = time.Until(d)
		}
		if wait <= 0 {
			fatal(t, ctx, "WaitText(%q, %q): timed out; the element's text is %s", sel, substr, currentText(ctx, sel))
		}
		s, err := chromedp.Run(tctx, chromedp.PollFunction[string](waitTextJS,
			chromedp.WithPollingMutation(),
			chromedp.WithPollingTimeout(wait),
			chromedp.WithPollingArgs(sel, substr)))
		switch {
		case err == nil:
			return s
		case isNavigationErr(err) && tctx.Err() == nil:
			continue // the document it polled went away; poll the new one
		case errors.Is(err, chromedp.ErrPollingTimeout) || errors.Is(err, context.DeadlineExceeded):
			fatal(t, ctx, "WaitText(%q, %q): timed out after %v; the element's text is %s", sel, substr, time.Since(begin).Round(time.Millisecond), currentText(ctx, sel))
		default:
			fatal(t, ctx, "WaitText(%q, %q): %v", sel, substr, err)
		}
	}
}

// isNavigationErr reports whether err says the page's JavaScript context
// went away, as it does when the tab navigates.
func isNavigationErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Execution context was destroyed") ||
		strings.Contains(s, "Cannot find context with specified id") ||
		strings.Contains(s, "Inspected target navigated or closed")
}

// currentText describes the text of sel's first match now, for a failure.
func currentText(ctx context.Context, sel string) string {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Evaluate[*string](`(el => el ? el.innerText : null)(document.querySelector(`+jsString(sel)+`))`))
	switch {
	case err != nil:
		return fmt.Sprintf("unknown (%v)", err)
	case s == nil:
		return "absent: no element matches"
	default:
		return fmt.Sprintf("%q", *s)
	}
}

// Click clicks the first element that matches sel with the mouse, once it
// is visible. It does not wait for a navigation: see ClickAndWait.
func Click(t testing.TB, ctx context.Context, sel string) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		fatal(t, ctx, "Click(%q): %v", sel, wrapErr(err))
	}
}

// ClickAndWait clicks the first element that matches sel (a link, a submit
// button: one whose name and value the form then sends) and waits for the
// navigation it starts to load; it returns the document's HTTP status.
func ClickAndWait(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	return ExpectNavigation(t, ctx, func() { Click(t, ctx, sel) })
}

// SetValue sets the value of the first element that matches sel (an
// input, a select, a textarea), without key events.
func SetValue(t testing.TB, ctx context.Context, sel, value string) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.SetValue(chromedp.CSS(sel), value)); err != nil {
		fatal(t, ctx, "SetValue(%q, %q): %v", sel, value, wrapErr(err))
	}
}

// SendKeys focuses the first element that matches sel, once visible, and
// types keys into it as key events ("\n" is Enter; see chromedp's kb
// package for other keys).
func SendKeys(t testing.TB, ctx context.Context, sel, keys string) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.SendKeys(chromedp.CSS(sel), keys)); err != nil {
		fatal(t, ctx, "SendKeys(%q, %q): %v", sel, keys, wrapErr(err))
	}
}

// submitJS submits the form of the element (or the form itself) the way
// pressing Enter in a field does: requestSubmit runs the constraint
// validation and the submit event. No submit button's name and value is
// sent: to send one, ClickAndWait on it.
const submitJS = `(sel => {
	const el = document.querySelector(sel);
	if (!el) throw new Error("no element matches " + sel);
	const form = el.form || el.closest("form");
	if (!form) throw new Error(sel + " is not a form nor in one");
	form.requestSubmit();
})`

// Submit submits the form that the first element matching sel is (or is
// in), waits for the navigation to load and returns the document's HTTP
// status. A form that fails validation does not submit: then it fails.
func Submit(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.WaitReady(chromedp.CSS(sel))); err != nil {
		fatal(t, ctx, "Submit(%q): %v", sel, wrapErr(err))
	}
	return ExpectNavigation(t, ctx, func() {
		if err := chromedp.Do(tctx, chromedp.Evaluate[chromedp.Void](submitJS+`(`+jsString(sel)+`)`)); err != nil {
			fatal(t, ctx, "Submit(%q): %v", sel, wrapErr(err))
		}
	})
}

// Screenshot writes a PNG of the whole page (beyond the window, to the
// bottom of the document) to path, creating its directory.
func Screenshot(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		fatal(t, ctx, "Screenshot(%q): %v", path, wrapErr(err))
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		fatal(t, ctx, "Screenshot(%q): Chromium did not return a PNG (%d bytes)", path, len(png))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("browsertest: Screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("browsertest: Screenshot: %v", err)
	}
}

// Cookie is a cookie as the browser stored it.
type Cookie struct {
	Name, Value, Domain, Path string
	HTTPOnly, Secure          bool
	// SameSite is "Strict", "Lax", "None", or "" when the Set-Cookie had no
	// SameSite attribute (Chromium then treats it as Lax).
	SameSite string
	// Session is true for a cookie without Expires or Max-Age; Expires is
	// zero then.
	Session bool
	Expires time.Time
}

// Cookies returns every cookie of the tab's browser context (so of every
// site it visited; tabs from NewTab share none).
func Cookies(t testing.TB, ctx context.Context) []Cookie {
	t.Helper()
	tctx, cancel := withTimeout(ctx)
	defer cancel()
	c := chromedp.FromContext(ctx)
	if c == nil || c.Target == nil {
		t.Fatalf("browsertest: Cookies: ctx is not a tab's context (Browser.NewTab)")
	}
	res, err := chromedp.CallBrowser(tctx, storage.GetCookies, storage.GetCookiesParams{BrowserContextID: c.BrowserContextID})
	if err != nil {
		fatal(t, ctx, "Cookies: %v", wrapErr(err))
	}
	out := make([]Cookie, 0, len(res.Cookies))
	for _, c := range res.Cookies {
		out = append(out, cookieOf(c))
	}
	return out
}

func cookieOf(c *network.Cookie) Cookie {
	ck := Cookie{
		Name: c.Name, Value: c.Value, Domain: c.Domain, Path: c.Path,
		HTTPOnly: c.HTTPOnly, Secure: c.Secure, SameSite: string(c.SameSite), Session: c.Session,
	}
	if !c.Session && c.Expires > 0 {
		sec := int64(c.Expires)
		ck.Expires = time.Unix(sec, int64((c.Expires-float64(sec))*1e9))
	}
	return ck
}

// CookieNamed returns the tab's cookie named name, and whether there is one.
func CookieNamed(t testing.TB, ctx context.Context, name string) (Cookie, bool) {
	t.Helper()
	for _, c := range Cookies(t, ctx) {
		if c.Name == name {
			return c, true
		}
	}
	return Cookie{}, false
}
