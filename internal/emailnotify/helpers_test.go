package emailnotify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

const (
	testAsk           = "run_01/ask_1"
	testPayloadDigest = "sha256:" + "abababababababababababababababababababababababababababababababab"
	testEventID       = "run_01/ask_1/ask.opened/3"
)

var (
	testNow     = time.Date(2030, 5, 1, 14, 0, 0, 0, time.UTC)
	testExpires = time.Date(2030, 5, 2, 18, 0, 0, 0, time.UTC)
)

func pendingAsk() *tollgatev1.Ask {
	return &tollgatev1.Ask{
		Id: testAsk, RunId: "run_01", Kind: tollgatev1.AskKind_ASK_KIND_APPROVAL, State: tollgatev1.AskState_ASK_STATE_PENDING,
		Title:       "Pay vendor V-1187",
		Summary:     "Quarterly invoice \u202etxt.exe for V-1187",
		Consequence: "pays 485000 INR to vendor V-1187 & co",
		Requester:   "alice",
		Actions: []*tollgatev1.Action{{StepId: "pay", Server: "payments", Tool: "pay",
			ArgsJson: `{"amount":485000,"currency":"INR","memo":"<img src=https://evil.example/t.png>","vendor":"V-1187"}`}},
		PayloadDigest:     testPayloadDigest,
		AuthorityRequired: &tollgatev1.AuthorityRequirement{Description: "1 of finance-approver, not the requester"},
		Options:           []*tollgatev1.AskOption{{Id: "1", Label: "Yes", Proceeds: true}, {Id: "2", Label: "No"}},
		ExpiresAt:         timestamppb.New(testExpires),
		OnExpiry:          tollgatev1.OnExpiry_ON_EXPIRY_REJECT,
		Quorum:            1,
	}
}

// packets serves one ask (or an error).
type packets struct {
	mu  sync.Mutex
	ask *tollgatev1.Ask
	err error
}

func (p *packets) Packet(_ context.Context, id string) (*tollgatev1.Ask, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	if p.ask == nil || p.ask.GetId() != id {
		return nil, fmt.Errorf("%q: %w", id, notice.ErrNoAsk)
	}
	return p.ask, nil
}

// linker mints distinct fake links and remembers each call.
type linker struct {
	mu    sync.Mutex
	calls []linkCall
	err   error
}

type linkCall struct {
	ask, person string
	expires     time.Time
	link        string
}

func (l *linker) AskURL(askID string) string { return "https://inbox.example/asks/" + askID }

func (l *linker) PersonLink(askID, person string, expires time.Time) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return "", l.err
	}
	link := fmt.Sprintf("https://inbox.example/l/lnk%d?for=%s", len(l.calls)+1, person)
	l.calls = append(l.calls, linkCall{askID, person, expires, link})
	return link, nil
}

func (l *linker) Calls() []linkCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]linkCall(nil), l.calls...)
}

type fixture struct {
	n       *Notifier
	packets *packets
	linker  *linker
}

// newNotifier builds a Notifier to addr (TLS none unless edit says) that
// knows dave's address.
func newNotifier(t *testing.T, addr string, edit func(*Config)) *fixture {
	t.Helper()
	fx := &fixture{packets: &packets{ask: pendingAsk()}, linker: &linker{}}
	cfg := Config{SMTPAddr: addr, From: "Tollgate <tollgate@example.com>", TLS: NoTLS,
		Addresses: map[string]string{"dave": "dave@example.com"},
		Packets:   fx.packets, Linker: fx.linker, Now: func() time.Time { return testNow },
		AttemptTimeout: 10 * time.Second, BaseBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxAttempts: 3}
	if edit != nil {
		edit(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx.n = n
	return fx
}

func event(t *testing.T, kind string, edit func(*webhook.Event)) []byte {
	t.Helper()
	ev := webhook.Event{ID: "run_01/ask_1/" + kind + "/3", Kind: kind, AskID: testAsk, RunID: "run_01",
		Title: "Pay vendor", Audience: "finance-approver", People: []string{"dave"}, ExpiresAt: testExpires,
		Payload: map[string]any{"state": "pending", "requester": "alice", "payload_digest": testPayloadDigest}}
	if edit != nil {
		edit(&ev)
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailpit test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func outcomes(ds []webhook.Delivery) string {
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprintf("%d:%s final=%v", d.Attempt, d.Outcome, d.Final))
	}
	return strings.Join(s, ", ")
}

func timestamp(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
