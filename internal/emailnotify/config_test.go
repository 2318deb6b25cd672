package emailnotify

import (
	"strings"
	"testing"
)

func TestNewRefuses(t *testing.T) {
	base := func() Config {
		return Config{SMTPAddr: "smtp.example.com:587", From: "tollgate@example.com", Packets: &packets{}, Linker: &linker{}}
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" means accepted
	}{
		{"starttls by default", func(c *Config) {}, ""},
		{"none off loopback", func(c *Config) { c.TLS = NoTLS }, "loopback"},
		{"none to a private address", func(c *Config) { c.TLS, c.SMTPAddr = NoTLS, "10.0.0.1:25" }, "loopback"},
		{"none to a name that resolves anywhere", func(c *Config) { c.TLS, c.SMTPAddr = NoTLS, "localhost.example.com:25" }, "loopback"},
		{"none on 127.0.0.1", func(c *Config) { c.TLS, c.SMTPAddr = NoTLS, "127.0.0.1:1025" }, ""},
		{"none on ::1", func(c *Config) { c.TLS, c.SMTPAddr = NoTLS, "[::1]:1025" }, ""},
		{"none on localhost", func(c *Config) { c.TLS, c.SMTPAddr = NoTLS, "localhost:1025" }, ""},
		{"a password in clear", func(c *Config) { c.TLS, c.SMTPAddr, c.Username, c.Password = NoTLS, "127.0.0.1:25", "u", "p" }, "only over TLS"},
		{"a password alone", func(c *Config) { c.Password = "p" }, "without a username"},
		{"a username with CRLF", func(c *Config) { c.Username = "u\r\nRCPT TO:<x@y>" }, "CR or LF"},
		{"an unknown mode", func(c *Config) { c.TLS = "ssl" }, "TLS mode"},
		{"no port", func(c *Config) { c.SMTPAddr = "smtp.example.com" }, "host:port"},
		{"no From", func(c *Config) { c.From = "" }, "From"},
		{"From without a domain", func(c *Config) { c.From = "tollgate" }, "From"},
		{"no Linker", func(c *Config) { c.Linker = nil }, "Linker"},
		{"no Packets", func(c *Config) { c.Packets = nil }, "Packets"},
		{"a bad address", func(c *Config) { c.Addresses = map[string]string{"dave": "dave at example"} }, "address entry"},
		{"an address with a header", func(c *Config) { c.Addresses = map[string]string{"dave": "dave@example.com\r\nBcc: x@y.z"} }, "address entry"},
		{"no person", func(c *Config) { c.Addresses = map[string]string{"": "dave@example.com"} }, "address entry"},
		{"a hello name with space", func(c *Config) { c.HelloName = "my host" }, "hello name"},
	} {
		cfg := base()
		tc.edit(&cfg)
		_, err := New(cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

func TestHeaderText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                      "plain",
		"a\r\nBcc: x@y":              "a Bcc: x@y",
		"tab\there\u2028and\u0085so": "tab here and so",
		"bidi \u202eevil":            "bidi evil",
		"für":                        "=?utf-8?q?f=C3=BCr?=",
	} {
		if got := headerText(in, 100); got != want {
			t.Errorf("headerText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := headerText(strings.Repeat("x", 500), 150); len(got) > 150*3 || strings.ContainsAny(got, "\r\n") {
		t.Errorf("long subject: %q", got)
	}
}
