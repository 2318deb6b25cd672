package mailpittest

import (
	"net"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReceivesAndStops(t *testing.T) {
	mp := Start(t)
	body := "From: a@example.com\r\nTo: b@example.com\r\nSubject: hello there\r\n\r\nbody text\r\n"
	if err := smtp.SendMail(mp.SMTPAddr, nil, "a@example.com", []string{"b@example.com"}, []byte(body)); err != nil {
		t.Fatal(err)
	}
	msgs := mp.WaitMessages(t, t.Context(), 1)
	if len(msgs) != 1 || msgs[0].Subject != "hello there" || len(msgs[0].To) != 1 || msgs[0].To[0].Address != "b@example.com" {
		t.Fatalf("messages = %+v", msgs)
	}
	m, err := mp.Message(t.Context(), msgs[0].ID)
	if err != nil || !strings.Contains(m.Text, "body text") {
		t.Fatalf("message = %+v (%v)", m, err)
	}
	raw, err := mp.Raw(t.Context(), msgs[0].ID)
	if err != nil || !strings.Contains(string(raw), "Subject: hello there\r\n") {
		t.Fatalf("raw = %q (%v)", raw, err)
	}
	mp.Stop()
	if c, err := net.DialTimeout("tcp", mp.SMTPAddr, time.Second); err == nil {
		c.Close()
		t.Fatal("the SMTP port still accepts connections after Stop")
	}
	mp.Stop() // twice is fine
}

func TestBinaryFromEnvMustExist(t *testing.T) {
	t.Setenv(EnvBinary, "/nonexistent/mailpit")
	if _, err := BinaryPath(); err == nil || !strings.Contains(err.Error(), EnvBinary) {
		t.Fatalf("BinaryPath() error = %v", err)
	}
}
