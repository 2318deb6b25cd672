package controlplane

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/emailnotify"
	"github.com/tollgate-dev/tollgate/internal/web"
)

// newEmail builds the email notifier from the options (nil without
// --smtp-addr). Its mail reads the server's packets, asked of server()
// when a notice goes out (as newSlack's). Every mail carries its person's
// single-use link, so it needs the web inbox.
func newEmail(o *Options, site *web.Site, server func() *Server, log *slog.Logger) (*emailnotify.Notifier, error) {
	if o.SMTPAddr == "" {
		if o.SMTPFrom != "" || o.SMTPUser != "" || o.SMTPPasswordFile != "" || len(o.Emails) > 0 || o.EmailIsPerson {
			return nil, errors.New("--smtp-*/--email need --smtp-addr: the SMTP server mail goes through")
		}
		return nil, nil
	}
	if site == nil {
		return nil, errors.New("--smtp-addr: every mail carries its person's link to the web inbox: give --web-listen too")
	}
	pw := ""
	if o.SMTPPasswordFile != "" {
		b, err := os.ReadFile(o.SMTPPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--smtp-password-file: %w", err)
		}
		pw = strings.TrimSpace(string(b))
	}
	var pool *x509.CertPool
	if o.SMTPCA != "" {
		b, err := os.ReadFile(o.SMTPCA)
		if err != nil {
			return nil, fmt.Errorf("--smtp-ca: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--smtp-ca %s: no PEM certificate in it", o.SMTPCA)
		}
	}
	addrs := map[string]string{}
	for _, e := range o.Emails {
		person, addr, ok := strings.Cut(e, "=")
		if !ok || person == "" || addr == "" {
			return nil, fmt.Errorf("--email %q: want PERSON=ADDRESS", e)
		}
		addrs[person] = addr
	}
	return emailnotify.New(emailnotify.Config{SMTPAddr: o.SMTPAddr, From: o.SMTPFrom, Username: o.SMTPUser, Password: pw,
		TLS: emailnotify.TLSMode(o.SMTPTLS), ServerName: o.SMTPServerName, RootCAs: pool, Addresses: addrs,
		EmailIsPerson: o.EmailIsPerson, Log: log, Linker: site,
		Packets: packetsOf(server)})
}
