package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (chromedp's
// readers, the allocator's waiters): each Start's cleanup must stop them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// csp is what the web inbox will send: no script of the page's own.
const csp = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'"

var goodPage = template.Must(template.New("good").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Good form</title></head>
<body>
<main>
<h1>Say hello</h1>
<form method="post" action="/submit">
  <label for="name">Your name</label>
  <input id="name" name="name" type="text" required>
  <button id="send" type="submit" name="how" value="button">Send</button>
</form>
<p><a id="bad-link" href="/bad">The bad page</a></p>
</main>
</body>
</html>`))

const badPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Bad form</title></head>
<body>
<main>
<h1>No label</h1>
<form method="post" action="/submit">
  <input id="nameless" name="name" type="text">
  <button type="submit">Send</button>
</form>
</main>
</body>
</html>`

// livePage changes its text when the server sends an event, as the inbox
// does (a test page may have a script; the inbox's may not).
const livePage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Live</title></head>
<body><main><h1>Live</h1><p id="status">pending</p>
<script>new EventSource("/events").onmessage = e => { document.getElementById("status").textContent = e.data; };</script>
</main></body></html>`

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = goodPage.Execute(w, nil)
	})
	mux.HandleFunc("GET /bad", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, badPage)
	})
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, livePage)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: approved by ada\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the stream stays open until the browser goes
	})
	mux.HandleFunc("POST /submit", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "s3cr3t", Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		http.SetCookie(w, &http.Cookie{Name: "theme", Value: "dark", Path: "/", MaxAge: 3600})
		// Post/redirect/get, as the inbox does.
		http.Redirect(w, r, "/done?"+r.PostForm.Encode(), http.StatusSeeOther)
	})
	mux.HandleFunc("GET /done", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Done</title></head><body><main><h1 id="greeting">Hello, %s</h1><p id="how">via %s</p></main></body></html>`,
			template.HTMLEscapeString(r.FormValue("name")), template.HTMLEscapeString(r.FormValue("how")))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// session is one test's server, browser and tab.
func session(t *testing.T) (*httptest.Server, *Browser, context.Context) {
	t.Helper()
	srv := newServer(t)
	b := Start(t)
	t.Logf("Chromium started in %v", b.StartDuration)
	return srv, b, b.NewTab(t)
}

func TestNavigateTextClickSubmit(t *testing.T) {
	srv, _, ctx := session(t)

	if st := Navigate(t, ctx, srv.URL+"/"); st != http.StatusOK {
		t.Fatalf("status %d, want 200", st)
	}
	if got := Title(t, ctx); got != "Good form" {
		t.Errorf("title %q", got)
	}
	if got := Text(t, ctx, "h1"); got != "Say hello" {
		t.Errorf("h1 %q", got)
	}
	if n := Count(t, ctx, "input"); n != 1 {
		t.Errorf("%d inputs, want 1", n)
	}
	if n := Count(t, ctx, "#nothing-here"); n != 0 {
		t.Errorf("Count of a missing element: %d", n)
	}
	if v, ok := Attr(t, ctx, "#name", "required"); !ok || v != "" {
		t.Errorf("required attribute: %q %v", v, ok)
	}

	// A 404 is a status, not a failure.
	if st := Navigate(t, ctx, srv.URL+"/missing"); st != http.StatusNotFound {
		t.Errorf("status %d, want 404", st)
	}
	if st := LastStatus(t, ctx); st != http.StatusNotFound {
		t.Errorf("LastStatus %d, want 404", st)
	}

	// Submit: requestSubmit, 303, GET; the GET's status.
	Navigate(t, ctx, srv.URL+"/")
	SetValue(t, ctx, "#name", "Ada")
	if got := Value(t, ctx, "#name"); got != "Ada" {
		t.Errorf("value %q", got)
	}
	if st := Submit(t, ctx, "#name"); st != http.StatusOK {
		t.Errorf("Submit status %d, want 200", st)
	}
	if got := Text(t, ctx, "#greeting"); got != "Hello, Ada" {
		t.Errorf("greeting %q", got)
	}
	if got := Location(t, ctx); !strings.HasPrefix(got, srv.URL+"/done?") {
		t.Errorf("location %q", got)
	}

	// A click on the submit button sends its name and value.
	Navigate(t, ctx, srv.URL+"/")
	SendKeys(t, ctx, "#name", "Grace")
	if st := ClickAndWait(t, ctx, "#send"); st != http.StatusOK {
		t.Errorf("ClickAndWait status %d", st)
	}
	if got := Text(t, ctx, "#greeting"); got != "Hello, Grace" {
		t.Errorf("greeting %q", got)
	}
	if got := Text(t, ctx, "#how"); got != "via button" {
		t.Errorf("how %q", got)
	}

	// A link.
	Navigate(t, ctx, srv.URL+"/")
	ExpectNavigation(t, ctx, func() { Click(t, ctx, "#bad-link") })
	if got := Text(t, ctx, "h1"); got != "No label" {
		t.Errorf("after the link: h1 %q", got)
	}
}

func TestWaitTextFollowsMutations(t *testing.T) {
	srv, _, ctx := session(t)
	Navigate(t, ctx, srv.URL+"/live")
	begin := time.Now()
	if got := WaitText(t, ctx, "#status", "approved"); got != "approved by ada" {
		t.Errorf("WaitText returned %q", got)
	}
	t.Logf("WaitText saw the update after %v", time.Since(begin))
	WaitVisible(t, ctx, "#status")
}

func TestCookies(t *testing.T) {
	srv, b, ctx := session(t)
	Navigate(t, ctx, srv.URL+"/")
	SetValue(t, ctx, "#name", "Ada")
	Submit(t, ctx, "form")

	sid, ok := CookieNamed(t, ctx, "sid")
	if !ok {
		t.Fatalf("no sid cookie in %+v", Cookies(t, ctx))
	}
	if !sid.HTTPOnly || !sid.Secure || sid.SameSite != "Strict" || !sid.Session || sid.Value != "s3cr3t" {
		t.Errorf("sid: %+v", sid)
	}
	theme, ok := CookieNamed(t, ctx, "theme")
	if !ok {
		t.Fatal("no theme cookie")
	}
	if theme.HTTPOnly || theme.Secure || theme.SameSite != "" || theme.Session || time.Until(theme.Expires) < 50*time.Minute {
		t.Errorf("theme: %+v", theme)
	}

	// Another tab is another browser context: no cookies.
	other := b.NewTab(t)
	Navigate(t, other, srv.URL+"/")
	if cs := Cookies(t, other); len(cs) != 0 {
		t.Errorf("a new tab has cookies: %+v", cs)
	}
}

func TestKeyboardOnlyPath(t *testing.T) {
	srv, _, ctx := session(t)
	Navigate(t, ctx, srv.URL+"/")

	if f := FocusedElement(t, ctx); f.Tag != "body" {
		t.Errorf("focus before any key: %+v", f)
	}
	var order []string
	for range 3 {
		Tab(t, ctx, 1)
		order = append(order, Focused(t, ctx))
	}
	if want := []string{"name", "send", "bad-link"}; !slices.Equal(order, want) {
		t.Errorf("Tab order %q, want %q", order, want)
	}
	ShiftTab(t, ctx, 2)
	f := FocusedElement(t, ctx)
	if f != (Focus{Tag: "input", ID: "name", Name: "Your name", Role: "textbox"}) {
		t.Errorf("after Shift+Tab twice: %+v", f)
	}
	TypeKeys(t, ctx, "Ada")
	Tab(t, ctx, 1)
	f = FocusedElement(t, ctx)
	if f.Name != "Send" || f.Role != "button" {
		t.Errorf("the button: %+v", f)
	}
	if st := ExpectNavigation(t, ctx, func() { PressEnter(t, ctx) }); st != http.StatusOK {
		t.Errorf("Enter on the button: status %d", st)
	}
	if got := Text(t, ctx, "#greeting"); got != "Hello, Ada" {
		t.Errorf("greeting %q", got)
	}

	// Space presses a button too.
	Navigate(t, ctx, srv.URL+"/")
	Tab(t, ctx, 1)
	TypeKeys(t, ctx, "Lin")
	Tab(t, ctx, 1)
	ExpectNavigation(t, ctx, func() { PressSpace(t, ctx) })
	if got := Text(t, ctx, "#greeting"); got != "Hello, Lin" {
		t.Errorf("greeting %q", got)
	}
}

func TestScreenshot(t *testing.T) {
	srv, _, ctx := session(t)
	Navigate(t, ctx, srv.URL+"/")
	p := filepath.Join(t.TempDir(), "shots", "good.png")
	Screenshot(t, ctx, p)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Dx(); got != Width {
		t.Errorf("width %d, want %d", got, Width)
	}
	if img.Bounds().Dy() < 100 {
		t.Errorf("height %d", img.Bounds().Dy())
	}
}

func TestAxe(t *testing.T) {
	srv, _, ctx := session(t)

	Navigate(t, ctx, srv.URL+"/bad")
	begin := time.Now()
	vs := Axe(t, ctx)
	t.Logf("axe (inject and run) took %v", time.Since(begin))
	i := slices.IndexFunc(vs, func(v Violation) bool { return v.ID == "label" })
	if i < 0 {
		t.Fatalf("no label violation on the bad page: %v", vs)
	}
	label := vs[i]
	if !label.Serious() || len(label.Nodes) != 1 || !slices.Equal(label.Nodes[0].Target, []string{"#nameless"}) || label.Help == "" {
		t.Errorf("label violation: %s", label)
	}
	// And RequireNoSeriousAxe fails on it, printing it.
	msg := fatalOf(t, func(ft testing.TB) { RequireNoSeriousAxe(ft, ctx) })
	for _, want := range []string{"serious or critical", "label", "#nameless", srv.URL + "/bad"} {
		if !strings.Contains(msg, want) {
			t.Errorf("RequireNoSeriousAxe's failure lacks %q:\n%s", want, msg)
		}
	}

	Navigate(t, ctx, srv.URL+"/")
	begin = time.Now()
	vs = Axe(t, ctx)
	t.Logf("axe (inject and run) took %v", time.Since(begin))
	for _, v := range vs {
		t.Errorf("the good page has a violation: %s", v)
	}
	RequireNoSeriousAxe(t, ctx)
	// A second run on the same document reuses the injected axe.
	begin = time.Now()
	Axe(t, ctx)
	t.Logf("axe (run only) took %v", time.Since(begin))
}

// TestFailuresSayWhere checks that the helpers fail, rather than hang or
// pass, and that the failure names the page and shows its HTML.
func TestFailuresSayWhere(t *testing.T) {
	srv, _, ctx := session(t)
	Navigate(t, ctx, srv.URL+"/live")
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()

	for name, f := range map[string]func(testing.TB){
		"WaitText":    func(ft testing.TB) { WaitText(ft, short, "#status", "rejected") },
		"Text":        func(ft testing.TB) { Text(ft, short, "#no-such-element") },
		"Click":       func(ft testing.TB) { Click(ft, short, "#no-such-element") },
		"WaitVisible": func(ft testing.TB) { WaitVisible(ft, short, "#no-such-element") },
	} {
		msg := fatalOf(t, f)
		for _, want := range []string{"page URL: " + srv.URL + "/live", "last document response: 200", "outerHTML: <html", `<p id="status">`} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s's failure lacks %q:\n%s", name, want, msg)
			}
		}
	}
	msg := fatalOf(t, func(ft testing.TB) { WaitText(ft, short, "#status", "rejected") })
	if !strings.Contains(msg, `the element's text is "approved by ada"`) {
		t.Errorf("WaitText's failure does not give the text it saw:\n%s", msg)
	}

	// A form that fails validation (the name is required) never navigates.
	Navigate(t, ctx, srv.URL+"/")
	short2, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	msg = fatalOf(t, func(ft testing.TB) { Submit(ft, short2, "form") })
	if !strings.Contains(msg, "no navigation loaded") {
		t.Errorf("Submit of an invalid form: %s", msg)
	}
}

func TestMissingDependencies(t *testing.T) {
	missing := func() (string, error) { return "", fmt.Errorf("browsertest: %w: install it", ErrNoChromium) }

	t.Setenv("CI", "")
	if msg := skipOf(t, func(ft testing.TB) { need(ft, missing, ErrNoChromium) }); !strings.Contains(msg, "install it") {
		t.Errorf("outside CI: skip message %q", msg)
	}
	t.Setenv("CI", "true")
	if msg := fatalOf(t, func(ft testing.TB) { need(ft, missing, ErrNoChromium) }); !strings.Contains(msg, "CI must install it") {
		t.Errorf("under CI: failure %q", msg)
	}

	// An override that names no file is an error, not a missing browser.
	t.Setenv(EnvChromium, filepath.Join(t.TempDir(), "no-chromium"))
	if _, err := ChromiumPath(); err == nil || errors.Is(err, ErrNoChromium) {
		t.Errorf("ChromiumPath with a bad $%s: %v", EnvChromium, err)
	}
	t.Setenv(EnvAxe, filepath.Join(t.TempDir(), "axe.min.js"))
	if _, err := AxePath(); err == nil || errors.Is(err, ErrNoAxe) {
		t.Errorf("AxePath with a bad $%s: %v", EnvAxe, err)
	}
}

// TestNoLeftoverProcess checks that a browser and its children are gone
// when the test that started it ends.
func TestNoLeftoverProcess(t *testing.T) {
	srv := newServer(t)
	var b *Browser
	t.Run("use", func(t *testing.T) {
		b = Start(t)
		ctx := b.NewTab(t)
		Navigate(t, ctx, srv.URL+"/")
		if len(processesUsing(b.dataDir)) < 2 {
			t.Errorf("expected Chromium and its children to use %s", b.dataDir)
		}
	})
	if b == nil {
		t.Fatal("no browser")
	}
	t.Logf("Chromium started in %v, closed in %v", b.StartDuration, b.closed)
	if b.leftovers != 0 {
		t.Errorf("%d processes had to be killed", b.leftovers)
	}
	if pids := processesUsing(b.dataDir); len(pids) != 0 {
		t.Errorf("processes still use the profile: %v", pids)
	}
	if err := syscall.Kill(b.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("browser process %d: kill 0: %v", b.Pid(), err)
	}
}

// fakeT records a Fatal or a Skip and ends its goroutine, as testing.T
// does, without failing the real test.
type fakeT struct {
	testing.TB
	fatal, skip string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeT) Fatal(args ...any) { f.fatal = fmt.Sprint(args...); runtime.Goexit() }
func (f *fakeT) Skip(args ...any)  { f.skip = fmt.Sprint(args...); runtime.Goexit() }
func (f *fakeT) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runFake(t *testing.T, fn func(testing.TB)) *fakeT {
	t.Helper()
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ft)
	}()
	<-done
	return ft
}

// fatalOf runs fn and returns what it passed to Fatal; it fails t if fn
// did not fail.
func fatalOf(t *testing.T, fn func(testing.TB)) string {
	t.Helper()
	ft := runFake(t, fn)
	if ft.fatal == "" {
		t.Errorf("expected a failure; got none (skip: %q)", ft.skip)
	}
	return ft.fatal
}

// skipOf runs fn and returns what it passed to Skip; it fails t if fn did
// not skip.
func skipOf(t *testing.T, fn func(testing.TB)) string {
	t.Helper()
	ft := runFake(t, fn)
	if ft.skip == "" {
		t.Errorf("expected a skip; got none (fatal: %q)", ft.fatal)
	}
	return ft.skip
}
