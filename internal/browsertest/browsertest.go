package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/tollgate-dev/tollgate/internal/reporoot"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

const (
	// EnvChromium names the environment variable that overrides the
	// browser's path.
	EnvChromium = "TOLLGATE_CHROMIUM"
	// EnvAxe names the environment variable that overrides the path of
	// axe.min.js.
	EnvAxe = "TOLLGATE_AXE"

	// DefaultTimeout bounds each helper's wait (an element to appear, a
	// navigation to load, a text to show up) when ctx has no earlier
	// deadline.
	DefaultTimeout = 15 * time.Second

	// Width and Height are the browser window's size in CSS pixels.
	Width, Height = 1280, 900

	// startTimeout bounds Chromium's start; closeTimeout its graceful
	// close; settleTimeout how long its child processes may take to exit
	// after it.
	startTimeout  = 60 * time.Second
	closeTimeout  = 10 * time.Second
	settleTimeout = 5 * time.Second
)

var (
	// ErrNoChromium is wrapped by ChromiumPath's error when no browser is
	// found.
	ErrNoChromium = errors.New("no Chromium")
	// ErrNoAxe is wrapped by AxePath's error when axe.min.js is not found.
	ErrNoAxe = errors.New("no axe-core")
)

// flags are the command-line switches Chromium starts with, besides
// --user-data-dir (a fresh directory per Start), --window-size and
// chromedp's --remote-debugging-pipe. The background-networking,
// component-update and sync switches keep it from reaching out: on a closed
// network it fails without them.
var flags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync",
}

// chromiumNames are looked up on $PATH in this order.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"}

// ChromiumPath returns the browser's path: $TOLLGATE_CHROMIUM, or else the
// first of chromium, chromium-browser, google-chrome-stable and
// google-chrome on $PATH. Its error wraps ErrNoChromium when there is none.
func ChromiumPath() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("browsertest: $%s=%s: %w", EnvChromium, p, err)
		}
		return p, nil
	}
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("browsertest: %w: none of %s on $PATH (install it with `apt-get install chromium` on Debian, or set $%s to a Chrome or Chromium binary)",
		ErrNoChromium, strings.Join(chromiumNames, ", "), EnvChromium)
}

// AxePath returns the path of axe.min.js: $TOLLGATE_AXE, or else
// tools/axe/node_modules/axe-core/axe.min.js at the repository root (found
// by walking up from the working directory, a test's being its package's).
// Its error wraps ErrNoAxe when there is none.
func AxePath() (string, error) {
	if p := os.Getenv(EnvAxe); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("browsertest: $%s=%s: %w", EnvAxe, p, err)
		}
		return p, nil
	}
	root, err := reporoot.Find()
	if err != nil {
		return "", fmt.Errorf("browsertest: %w", err)
	}
	p := filepath.Join(root, "tools", "axe", "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("browsertest: %w at %s (install it with `npm ci --prefix tools/axe` at the repository root, or set $%s to an axe.min.js): %w",
			ErrNoAxe, p, EnvAxe, err)
	}
	return p, nil
}

// need returns find's path, or skips t when its error wraps missing, or
// fails t when that happens under CI=true (CI must install it) or on another
// error.
func need(t testing.TB, find func() (string, error), missing error) string {
	t.Helper()
	p, err := find()
	switch {
	case err == nil:
		return p
	case errors.Is(err, missing) && os.Getenv("CI") != "true":
		t.Skip(err)
	case errors.Is(err, missing):
		t.Fatal(err.Error() + "; CI must install it before the tests (.ci/run)")
	default:
		t.Fatal(err)
	}
	return ""
}

// Browser is a running Chromium owned by one test.
type Browser struct {
	ctx     context.Context // the chromedp context that allocated it
	pid     int
	dataDir string
	out     *lockedBuffer // Chromium's stdout and stderr

	// StartDuration is how long Chromium took to start and attach its
	// first tab.
	StartDuration time.Duration

	leftovers int           // processes still using dataDir after the close, killed
	closed    time.Duration // how long the close took
}

// Start starts Chromium for t with a fresh profile in a directory of t's
// and a 1280x900 window: --headless --no-sandbox --disable-gpu
// --disable-quic --no-first-run --disable-background-networking
// --disable-component-update --disable-sync, and quieter defaults after
// chromedp's. It closes it when t ends: gracefully (Browser.close), then it
// waits for every process that uses the profile to exit, and kills and
// reports (t.Errorf) any still there after a few seconds. Without a browser
// the test skips, or under CI=true fails.
//
// Start the test's HTTP server before the browser: cleanups run last-in,
// first-out, so the browser, and its open connections (an EventSource),
// are gone before the server's Close waits for them. Tabs of one Browser
// may be used from parallel subtests, one tab each.
func Start(t testing.TB) *Browser {
	t.Helper()
	bin := need(t, ChromiumPath, ErrNoChromium)
	dir := t.TempDir() // removed after the cleanup below: cleanups run last-in, first-out
	b := &Browser{dataDir: dir, out: &lockedBuffer{}}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(Width, Height),
		chromedp.CombinedOutput(b.out),
		// Quiet and deterministic, after chromedp's defaults.
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-hang-monitor", true),
		chromedp.Flag("disable-popup-blocking", true),
		chromedp.Flag("disable-prompt-on-repost", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("force-color-profile", "srgb"),
	}
	for _, f := range flags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b.ctx = ctx

	// The first Do binds the browser's life to the context it gets, so it
	// gets one without a deadline; the watchdog kills a start that hangs.
	begin := time.Now()
	watchdog := time.AfterFunc(startTimeout, allocCancel)
	err := chromedp.Do(ctx)
	watchdog.Stop()
	b.StartDuration = time.Since(begin)
	if err != nil {
		cancel()
		allocCancel()
		b.reapLeftovers()
		t.Fatalf("browsertest: starting %s: %v\nits output:\n%s", bin, err, b.out.tail(4000))
	}
	if p := chromedp.FromContext(ctx).Browser.Process(); p != nil {
		b.pid = p.Pid
	}
	t.Cleanup(func() {
		b.close(t, cancel, allocCancel)
	})
	return b
}

// Pid returns the browser process's id.
func (b *Browser) Pid() int { return b.pid }

// Output returns what Chromium printed (the last 64 KiB).
func (b *Browser) Output() string { return b.out.tail(64 << 10) }

// close closes the browser gracefully (chromedp.Cancel: Browser.close,
// then it waits for the process), stops the allocator, and waits for the
// processes that still use the profile (zygotes, utilities) to go.
func (b *Browser) close(t testing.TB, cancel, allocCancel context.CancelFunc) {
	t.Helper()
	begin := time.Now()
	defer func() { b.closed = time.Since(begin) }()
	cctx, ccancel := context.WithTimeout(b.ctx, closeTimeout)
	err := chromedp.Cancel(cctx)
	ccancel()
	cancel()
	allocCancel() // kills the process if the graceful close timed out, and waits for it
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("browsertest: closing Chromium (pid %d): %v", b.pid, err)
	}
	if n := b.reapLeftovers(); n > 0 {
		t.Errorf("browsertest: %d Chromium process(es) still used %s after the browser closed; killed them", n, b.dataDir)
	}
}

// reapLeftovers waits up to settleTimeout for the processes that have
// b.dataDir as their --user-data-dir to exit, then kills those left and
// returns how many there were. Without /proc it returns 0.
func (b *Browser) reapLeftovers() int {
	deadline := time.Now().Add(settleTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pids := processesUsing(b.dataDir)
		if len(pids) == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			b.leftovers += len(pids)
			return len(pids)
		}
		<-tick.C
	}
}

// processesUsing returns the ids of the processes whose command line has
// --user-data-dir=dir: Chromium passes it to every child but its crash
// handlers (chrome_crashpad_handler), which exit by themselves shortly
// after the browser.
func processesUsing(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte("--user-data-dir=" + dir)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && isZombie(stat) {
			continue // exited; its parent has not reaped it yet
		}
		if hasArg(cmdline, want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hasArg reports whether cmdline has the argument arg. Chromium's children
// rewrite their command line (setproctitle) into one string, arguments
// separated by spaces instead of NULs, so either ends an argument.
func hasArg(cmdline, arg []byte) bool {
	for i := 0; ; {
		j := bytes.Index(cmdline[i:], arg)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(arg)
		if (start == 0 || cmdline[start-1] == 0 || cmdline[start-1] == ' ') &&
			(end == len(cmdline) || cmdline[end] == 0 || cmdline[end] == ' ') {
			return true
		}
		i = start + 1
	}
}

// isZombie reports whether /proc/PID/stat says the process has state Z.
func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// tab is a tab's state, kept in the context NewTab returns.
type tab struct {
	b         *Browser
	mainFrame cdp.FrameID

	mu     sync.Mutex
	status int64  // the last main-frame document response's status
	url    string // and its URL
}

type tabKey struct{}

func tabOf(ctx context.Context) *tab {
	tb, _ := ctx.Value(tabKey{}).(*tab)
	return tb
}

// NewTab opens a tab, in a browser context of its own: it shares no
// cookies or storage with other tabs. It is closed (and its browser context
// disposed of) when t ends. The returned context is a chromedp context for
// the tab: pass it to this package's helpers, or to chromedp.Run and Do.
// Derive a context with a deadline from it to shorten the helpers' waits.
func (b *Browser) NewTab(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	tb := &tab{b: b}
	ctx = context.WithValue(ctx, tabKey{}, tb)
	// The first Do binds the tab's event loop to the context it gets, so
	// it gets one without a deadline; the watchdog ends a hung attach.
	watchdog := time.AfterFunc(DefaultTimeout, cancel)
	err := chromedp.Do(ctx)
	watchdog.Stop()
	if err != nil {
		cancel()
		t.Fatalf("browsertest: opening a tab: %v\nChromium's output:\n%s", err, b.out.tail(4000))
	}
	t.Cleanup(cancel)
	tb.mainFrame = cdp.FrameID(chromedp.FromContext(ctx).Target.TargetID)
	err = chromedp.Listen(ctx, func(ev any) {
		// In the tab's event loop: quick, no commands.
		if ev, ok := ev.(*network.EventResponseReceived); ok && ev.Type == network.ResourceTypeDocument && ev.FrameID == tb.mainFrame {
			tb.mu.Lock()
			tb.status, tb.url = ev.Response.Status, ev.Response.URL
			tb.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("browsertest: listening to the tab's events: %v", err)
	}
	return ctx
}

// lockedBuffer is an io.Writer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 { // keep the last 512 KiB or so
		tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-512<<10:]...)
		b.buf.Reset()
		b.buf.Write(tail)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return string(s)
}
