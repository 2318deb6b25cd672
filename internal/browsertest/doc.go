// Package browsertest drives a real headless Chromium for the web inbox's
// tests (internal/web): navigation, forms, the keyboard, cookies, full-page
// screenshots and accessibility checks with axe-core.
//
// Start launches one Chromium for a test (chromedp's exec allocator, over a
// pipe) with a fresh profile and a 1280x900 window, and closes it when the
// test ends: gracefully first, then any process still using the profile is
// killed and reported. NewTab opens a tab in a browser context of its own
// (its own cookie jar and storage, like a private window), closed when the
// test that opened it ends; the context it returns is a chromedp context,
// so chromedp's actions work on it too.
//
// The helpers take (t, ctx) and fail the test with t.Fatalf, naming the
// action and the selector and adding the page's URL, the status of its last
// document response and its outerHTML (trimmed). Each waits at most
// DefaultTimeout, or less when ctx has an earlier deadline. Selectors are CSS
// selectors. None of them sleeps: waits are chromedp queries (an element
// ready or visible), the load events of a navigation, and for WaitText a
// predicate re-checked on every DOM mutation.
//
// Chromium is $TOLLGATE_CHROMIUM, or else chromium (chromium-browser,
// google-chrome) on $PATH; axe-core is $TOLLGATE_AXE (the path of
// axe.min.js), or else tools/axe/node_modules/axe-core/axe.min.js at the
// repository root, installed by `npm ci --prefix tools/axe`. Without one of
// them the test skips and says how to install it, except under CI=true,
// where it fails.
//
// It enforces no invariant; it is a tool for tests.
package browsertest
