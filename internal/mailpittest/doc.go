// Package mailpittest runs a real SMTP server, Mailpit (the binary built
// from tools/mailpit, a module of its own, by `make mailpit`), on loopback
// for a test, and reads the messages it received through its REST API
// (/api/v1/messages, /api/v1/message/{ID}, …/raw).
//
// Start picks free 127.0.0.1 ports for SMTP and for the HTTP API, keeps
// its database in the test's temporary directory, turns off everything
// that would reach out (the version check, reverse DNS), starts the
// binary in a process group of its own, waits until /readyz answers and
// the SMTP port accepts connections, and kills it when the test ends.
// Options add STARTTLS or implicit TLS with a certificate the test made,
// AUTH that accepts any password, and Mailpit's "chaos" (SMTP replies
// with a chosen error code, set at run time with SetChaos).
//
// The binary is $TOLLGATE_MAILPIT, or else bin/mailpit at the repository
// root. Without it the test skips, except under CI=true, where it fails.
// This package runs the binary and does not import Mailpit: it stays out
// of the main module.
//
// It enforces no invariant; it is a tool for tests.
package mailpittest
