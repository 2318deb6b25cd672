package mailpittest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tollgate-dev/tollgate/internal/reporoot"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvBinary names the environment variable that overrides the binary's path.
const EnvBinary = "TOLLGATE_MAILPIT"

// readyTimeout bounds how long Start waits for Mailpit to answer.
const readyTimeout = 30 * time.Second

// DefaultWait bounds WaitMessages when its context has no deadline.
const DefaultWait = 15 * time.Second

// ErrNoBinary is wrapped by BinaryPath's error when there is no binary.
var ErrNoBinary = errors.New("no Mailpit binary")

// Option changes how Mailpit is started.
type Option func(*config)

type config struct {
	certFile, keyFile string
	implicitTLS       bool
	authAny           bool
	chaos             bool
	args              []string
}

// STARTTLS offers STARTTLS with the certificate and key in these PEM
// files (the server then also requires it).
func STARTTLS(certFile, keyFile string) Option {
	return func(c *config) { c.certFile, c.keyFile, c.implicitTLS = certFile, keyFile, false }
}

// ImplicitTLS speaks TLS from the first byte (SMTPS) with the
// certificate and key in these PEM files.
func ImplicitTLS(certFile, keyFile string) Option {
	return func(c *config) { c.certFile, c.keyFile, c.implicitTLS = certFile, keyFile, true }
}

// AuthAcceptAny offers AUTH and accepts any username and password.
func AuthAcceptAny() Option { return func(c *config) { c.authAny = true } }

// Chaos enables Mailpit's chaos triggers: see SetChaos.
func Chaos() Option { return func(c *config) { c.chaos = true } }

// Args adds mailpit command-line arguments.
func Args(args ...string) Option { return func(c *config) { c.args = append(c.args, args...) } }

// Mailpit is a running (or stopped) Mailpit owned by one test.
type Mailpit struct {
	// SMTPAddr is the SMTP server as 127.0.0.1:PORT.
	SMTPAddr string
	// APIURL is the HTTP API's base, http://127.0.0.1:PORT (no slash).
	APIURL string

	cmd     *exec.Cmd
	done    chan struct{}
	log     *lockedBuffer
	tr      *http.Transport
	http    *http.Client
	stopped sync.Once
}

// Start starts Mailpit for t and waits until it is ready. It is killed
// when t ends.
func Start(t testing.TB, opts ...Option) *Mailpit {
	t.Helper()
	bin := Binary(t)
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	for range 5 {
		var m *Mailpit
		m, err = launch(bin, t.TempDir(), cfg)
		if err == nil {
			t.Cleanup(m.Stop)
			return m
		}
		// A free port picked for Mailpit can be taken by someone else
		// before Mailpit binds it: pick others.
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatal(err)
	return nil
}

// Binary returns the path of the Mailpit binary (BinaryPath). If there is
// none the test skips, or under CI=true fails.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := BinaryPath()
	switch {
	case err == nil:
		return p
	case errors.Is(err, ErrNoBinary) && os.Getenv("CI") != "true":
		t.Skip(err)
	case errors.Is(err, ErrNoBinary):
		t.Fatal(err.Error() + "; CI must build it before the tests (make mailpit)")
	default:
		t.Fatal(err)
	}
	return ""
}

// BinaryPath is $TOLLGATE_MAILPIT, or else bin/mailpit at the root of the
// repository that holds the working directory. Its error wraps
// ErrNoBinary when there is none there.
func BinaryPath() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("mailpittest: $%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	root, err := reporoot.Find()
	if err != nil {
		return "", fmt.Errorf("mailpittest: %w", err)
	}
	p := filepath.Join(root, "bin", "mailpit")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("mailpittest: %w at %s (build it with `make mailpit` at the repository root, ~3 min cold, or set $%s): %w", ErrNoBinary, p, EnvBinary, err)
	}
	return p, nil
}

var errPortTaken = errors.New("mailpittest: a port was taken before Mailpit bound it")

func launch(bin, dir string, cfg config) (*Mailpit, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	m := &Mailpit{
		SMTPAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		APIURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		done:     make(chan struct{}),
		log:      &lockedBuffer{},
		tr:       tr,
		http:     &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}
	args := []string{
		"--smtp", m.SMTPAddr,
		"--listen", m.APIURL[len("http://"):],
		"--database", filepath.Join(dir, "mailpit.db"),
		"--disable-version-check",
		"--smtp-disable-rdns",
		"--disable-html-check",
	}
	if cfg.certFile != "" {
		args = append(args, "--smtp-tls-cert", cfg.certFile, "--smtp-tls-key", cfg.keyFile)
		if cfg.implicitTLS {
			args = append(args, "--smtp-require-tls")
		} else {
			args = append(args, "--smtp-require-starttls")
		}
	}
	if cfg.authAny {
		args = append(args, "--smtp-auth-accept-any")
	}
	if cfg.chaos {
		args = append(args, "--enable-chaos")
	}
	args = append(args, cfg.args...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// Mailpit reads MP_* settings from its environment: give it none of
	// the caller's, and keep its temporary files in dir.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MP_") && !strings.HasPrefix(kv, "TMPDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TMPDIR="+dir)
	cmd.SysProcAttr = procAttr()
	cmd.Stdout, cmd.Stderr = m.log, m.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mailpittest: starting %s: %w", bin, err)
	}
	m.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(m.done)
	}()
	if err := m.waitReady(); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

// waitReady waits until /readyz answers 200 and the SMTP port accepts
// connections.
func (m *Mailpit) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if m.ready() {
			return nil
		}
		select {
		case <-m.done:
			log := m.Log()
			err := fmt.Errorf("mailpittest: mailpit exited before it was ready (%v); its output:\n%s", m.cmd.ProcessState, log)
			if strings.Contains(log, "address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mailpittest: mailpit was not ready within %v; its output:\n%s", readyTimeout, m.Log())
		}
	}
}

func (m *Mailpit) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.APIURL+"/readyz", nil)
	resp, err := m.http.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", m.SMTPAddr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n { // hold every listener until all are picked: n distinct ports
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Stop kills Mailpit's process group and waits for the process to be
// gone; its SMTP port then refuses connections. Stopping a stopped
// Mailpit does nothing.
func (m *Mailpit) Stop() {
	m.stopped.Do(func() {
		killGroup(m.cmd.Process)
		<-m.done
		m.tr.CloseIdleConnections()
	})
}

// Log returns what Mailpit has printed so far.
func (m *Mailpit) Log() string { return m.log.String() }

// Address is a mailbox as Mailpit's API gives it.
type Address struct {
	Name    string
	Address string
}

// Summary is one message in Messages' list.
type Summary struct {
	ID        string
	MessageID string
	From      *Address
	To        []Address
	Cc        []Address
	Bcc       []Address
	Subject   string
	Created   time.Time
	Size      uint64
}

// Message is one message as Mailpit parsed it.
type Message struct {
	ID          string
	MessageID   string
	From        *Address
	To          []Address
	Cc          []Address
	Bcc         []Address
	ReplyTo     []Address
	Subject     string
	Date        time.Time
	Text        string
	HTML        string
	Username    string // who authenticated, if anyone
	Size        uint64
	Inline      []json.RawMessage
	Attachments []json.RawMessage
}

// Messages returns the messages received, newest first (up to 1000).
func (m *Mailpit) Messages(ctx context.Context) ([]Summary, error) {
	var out struct {
		Messages []Summary `json:"messages"`
	}
	if err := m.getJSON(ctx, "/api/v1/messages?limit=1000", &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// Message returns one message, its text and HTML parts decoded.
func (m *Mailpit) Message(ctx context.Context, id string) (Message, error) {
	var out Message
	err := m.getJSON(ctx, "/api/v1/message/"+url.PathEscape(id), &out)
	return out, err
}

// Raw returns one message exactly as it was received (after DATA's
// dot-unstuffing).
func (m *Mailpit) Raw(ctx context.Context, id string) ([]byte, error) {
	return m.fetch(ctx, http.MethodGet, "/api/v1/message/"+url.PathEscape(id)+"/raw", nil)
}

// ChaosTrigger makes one SMTP stage fail with ErrorCode (400–599) with
// Probability percent.
type ChaosTrigger struct {
	ErrorCode   int
	Probability int
}

// ChaosTriggers are the stages Mailpit can make fail: MAIL FROM
// (Sender), RCPT TO (Recipient), AUTH (Authentication).
type ChaosTriggers struct {
	Sender, Recipient, Authentication ChaosTrigger
}

// SetChaos sets the chaos triggers (Start with Chaos). The zero value
// turns every trigger off.
func (m *Mailpit) SetChaos(ctx context.Context, c ChaosTriggers) error {
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = m.fetch(ctx, http.MethodPut, "/api/v1/chaos", body)
	return err
}

// WaitMessages polls Messages until there are at least n and returns
// them; it fails t when ctx ends first, or after DefaultWait if ctx has
// no deadline.
func (m *Mailpit) WaitMessages(t testing.TB, ctx context.Context, n int) []Summary {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	var seen []Summary
	var lastErr error
	for {
		msgs, err := m.Messages(ctx)
		if err == nil {
			if len(msgs) >= n {
				return msgs
			}
			seen = msgs
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("mailpittest: %d message(s) received, want %d (%v); the last query error: %v; mailpit's output:\n%s", len(seen), n, context.Cause(ctx), lastErr, m.Log())
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (m *Mailpit) getJSON(ctx context.Context, path string, v any) error {
	b, err := m.fetch(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("mailpittest: %s: %w", path, err)
	}
	return nil
}

func (m *Mailpit) fetch(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, m.APIURL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("mailpittest: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
