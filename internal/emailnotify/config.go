package emailnotify

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"os"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// TLSMode is how the connection to the SMTP server is protected.
type TLSMode string

const (
	// StartTLS connects in clear and upgrades with STARTTLS before
	// anything else is said; a server that does not offer it gets
	// nothing (Rejected). The default.
	StartTLS TLSMode = "starttls"
	// ImplicitTLS speaks TLS from the first byte (SMTPS, port 465).
	ImplicitTLS TLSMode = "tls"
	// NoTLS sends in clear: only to a server on loopback (a local relay
	// or a test server), and never with a password.
	NoTLS TLSMode = "none"
)

// Config is what a Notifier needs. Nothing is read from it after New.
type Config struct {
	// SMTPAddr is the submission server as host:port.
	SMTPAddr string
	// From is the sender: an address, or "Name <address>".
	From string
	// Username and Password, when Username is set, authenticate with
	// AUTH PLAIN — only over TLS (New refuses them with NoTLS).
	Username, Password string
	// TLS is StartTLS (default), ImplicitTLS, or NoTLS (loopback only).
	TLS TLSMode
	// ServerName is the name the server's certificate must hold
	// (default: SMTPAddr's host).
	ServerName string
	// RootCAs verifies the server's certificate (default: the system's).
	RootCAs *x509.CertPool
	// HelloName is what EHLO says (default: the host name, or
	// "localhost" when it is not a plain DNS name).
	HelloName string

	// Addresses maps people to their email addresses. It is consulted
	// first.
	Addresses map[string]string
	// EmailIsPerson lets a person with no entry in Addresses be mailed at
	// their name when it is a bare email address (deployments whose
	// people are named by email, --oidc-person-claim email).
	EmailIsPerson bool

	Packets notice.Packets // required
	Linker  notice.Linker  // required: every notice of an open ask carries its person's link (PersonLink; AskURL only when that fails)

	Now func() time.Time // default time.Now
	Log *slog.Logger     // default discards

	// Bounds. Zero means the default.
	DialTimeout    time.Duration // TCP connect (default 10s)
	AttemptTimeout time.Duration // one attempt: packet, connect, TLS, the whole SMTP exchange (default 30s)
	Concurrency    int           // SMTP sessions at once (default 4); others wait, holding no connection
	Remembered     int           // (event, endpoint) pairs remembered as sent, so a delivery handed over twice mails once (default 4096)
	MaxAttempts    int           // attempts per delivery (default 5)
	BaseBackoff    time.Duration // first retry wait (default 2s), doubling, with jitter
	MaxBackoff     time.Duration // longest retry wait (default 1m)
}

// Notifier sends notices by email: Endpoints names them, Deliver sends
// one (approvals.Sender).
type Notifier struct {
	cfg    Config
	from   mail.Address
	domain string // From's domain: the right of each Message-ID
	sem    chan struct{}
	sent   *lru.Cache[string, struct{}] // event id + "\x00" + endpoint
	tries  notice.Attempts
}

// EndpointPrefix starts every endpoint name the Notifier delivers to:
// "email:" and a person.
const EndpointPrefix = "email:"

// New checks cfg and returns a Notifier.
func New(cfg Config) (*Notifier, error) {
	host, port, err := net.SplitHostPort(cfg.SMTPAddr)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("emailnotify: SMTP address %q: want host:port", cfg.SMTPAddr)
	}
	if cfg.TLS == "" {
		cfg.TLS = StartTLS
	}
	switch cfg.TLS {
	case StartTLS, ImplicitTLS:
	case NoTLS:
		if !loopback(host) {
			return nil, fmt.Errorf("emailnotify: TLS mode %q sends in clear: only to a server on loopback, not %q (use %q or %q)", NoTLS, host, StartTLS, ImplicitTLS)
		}
		if cfg.Username != "" || cfg.Password != "" {
			return nil, fmt.Errorf("emailnotify: a password is sent only over TLS: TLS mode %q takes no username or password", NoTLS)
		}
	default:
		return nil, fmt.Errorf("emailnotify: TLS mode %q: want %q, %q or %q", cfg.TLS, StartTLS, ImplicitTLS, NoTLS)
	}
	if cfg.Password != "" && cfg.Username == "" {
		return nil, errors.New("emailnotify: a password without a username")
	}
	if strings.ContainsAny(cfg.Username+cfg.Password, "\x00\r\n") {
		return nil, errors.New("emailnotify: username or password holds NUL, CR or LF")
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("emailnotify: From %q: %w", cfg.From, err)
	}
	_, domain, _ := strings.Cut(from.Address, "@")
	if domain == "" || !dnsName(domain) {
		return nil, fmt.Errorf("emailnotify: From %q: want an address at a domain", cfg.From)
	}
	if cfg.Packets == nil {
		return nil, errors.New("emailnotify: no Packets source")
	}
	if cfg.Linker == nil {
		return nil, errors.New("emailnotify: no Linker: every notice carries its person's single-use link (the web inbox)")
	}
	addrs := make(map[string]string, len(cfg.Addresses))
	for person, a := range cfg.Addresses {
		addr, ok := bareAddress(a)
		if person == "" || !ok {
			return nil, fmt.Errorf("emailnotify: address entry %q=%q: want a person and an email address", person, a)
		}
		addrs[person] = addr
	}
	cfg.Addresses = addrs
	if cfg.HelloName == "" {
		cfg.HelloName = "localhost"
		if h, err := os.Hostname(); err == nil && dnsName(h) {
			cfg.HelloName = h
		}
	}
	if !dnsName(cfg.HelloName) {
		return nil, fmt.Errorf("emailnotify: hello name %q is not a DNS name", cfg.HelloName)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	notice.Default(&cfg.Concurrency, 4)
	notice.Default(&cfg.Remembered, 4096)
	notice.Default(&cfg.MaxAttempts, 5)
	notice.Default(&cfg.DialTimeout, 10*time.Second)
	notice.Default(&cfg.AttemptTimeout, 30*time.Second)
	notice.Default(&cfg.BaseBackoff, 2*time.Second)
	notice.Default(&cfg.MaxBackoff, time.Minute)

	n := &Notifier{cfg: cfg, from: *from, domain: domain,
		sem: make(chan struct{}, cfg.Concurrency), sent: lru.New[string, struct{}](cfg.Remembered),
		tries: notice.Attempts{Name: "email", Log: cfg.Log, Now: cfg.Now,
			Max: cfg.MaxAttempts, BaseBackoff: cfg.BaseBackoff, MaxBackoff: cfg.MaxBackoff}}
	return n, nil
}

// address is person's email address: Addresses', or with EmailIsPerson
// their name when it is a bare address.
func (n *Notifier) address(person string) (string, bool) {
	if person == "" {
		return "", false
	}
	if a, ok := n.cfg.Addresses[person]; ok {
		return a, true
	}
	if n.cfg.EmailIsPerson {
		if a, ok := bareAddress(person); ok && a == person {
			return a, true
		}
	}
	return "", false
}

// bareAddress is the address s names (an address, or "Name <address>"),
// when it is one with a domain.
func bareAddress(s string) (string, bool) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return "", false
	}
	local, domain, ok := strings.Cut(a.Address, "@")
	if !ok || local == "" || !dnsName(domain) || strings.ContainsFunc(a.Address, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		return "", false
	}
	return a.Address, true
}

// loopback reports whether host is a loopback address or "localhost".
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dnsName reports whether s is a plain DNS name (letters, digits, '-' and
// '.'), or an address literal in brackets.
func dnsName(s string) bool {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return net.ParseIP(strings.TrimPrefix(s[1:len(s)-1], "IPv6:")) != nil
	}
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '.' {
			return false
		}
	}
	return true
}
