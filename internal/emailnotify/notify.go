package emailnotify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/notice"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Endpoints names the endpoints that want ev: EndpointPrefix and a person,
// for each person ev names (Event.People, then Event.Audience when it is a
// person) who has an address now, once each. Every kind of event: an
// opened, reminder or escalated notice carries the person's link; a
// decided or expired one says how the ask ended, with no link.
func (n *Notifier) Endpoints(ev webhook.Event) []string {
	if !notice.Deliverable(ev) {
		return nil
	}
	var out []string
	people := append(slices.Clone(ev.People), ev.Audience)
	// The people policy finds able to decide an ask of a role (the
	// control plane's notice names them: approvals.Desk.deciders).
	switch ds := ev.Payload["deciders"].(type) {
	case []string:
		people = append(people, ds...)
	case []any:
		for _, d := range ds {
			if s, ok := d.(string); ok {
				people = append(people, s)
			}
		}
	}
	for _, p := range people {
		if _, ok := n.address(p); ok && !slices.Contains(out, EndpointPrefix+p) {
			out = append(out, EndpointPrefix+p)
		}
	}
	return out
}

// Deliver sends raw, a webhook.Event as webhook.Notifier.Prepare encodes
// it, to the person an endpoint names (approvals.Sender), and returns when
// the delivery is final, as pkg/webhook's Deliver does: every attempt goes
// to rec as it happens, the last with Final set. Delivery.Status is the
// SMTP reply code (250 when delivered; 0 without a reply).
//
// A network error, a timeout, a 4xx reply or a packet that could not be
// read is retried with backoff up to MaxAttempts (Failed after); a 5xx
// reply, a server without STARTTLS (StartTLS) or AUTH (with a username),
// an ask that does not exist or raw that is not an event is Rejected; a
// person without an address now is Dropped. When ctx ends first the
// result is Abandoned, not Final, and not recorded. An event already sent
// to the endpoint (remembered, bounded) is Delivered again without
// mailing it twice.
func (n *Notifier) Deliver(ctx context.Context, endpoint string, raw []byte, rec webhook.Recorder) webhook.Delivery {
	ev, d, ok := n.tries.Decode(ctx, endpoint, raw, rec)
	if !ok {
		return d
	}
	person, _ := strings.CutPrefix(endpoint, EndpointPrefix)
	to, ok := n.address(person)
	if !strings.HasPrefix(endpoint, EndpointPrefix) || !ok {
		return n.tries.Drop(ctx, rec, ev, endpoint, fmt.Sprintf("no email address for endpoint %q", endpoint))
	}
	return n.tries.Deliver(ctx, rec, ev, endpoint, func() (webhook.Delivery, time.Duration) {
		return n.attempt(ctx, ev, endpoint, person, to), 0
	})
}

// attempt makes one attempt: read the packet, compose, send.
func (n *Notifier) attempt(ctx context.Context, ev webhook.Event, endpoint, person, to string) (d webhook.Delivery) {
	id := notice.NewID("eml_")
	d = webhook.Delivery{ID: id, At: n.cfg.Now()}
	start := time.Now()
	defer func() { d.Duration = time.Since(start) }()

	key := ev.ID + "\x00" + endpoint
	if ev.ID != "" && n.wasSent(key) {
		d.Outcome, d.Status = webhook.Delivered, 250 // mailed already
		return d
	}
	select {
	case n.sem <- struct{}{}:
		defer func() { <-n.sem }()
	case <-ctx.Done():
		d.Outcome, d.Err = webhook.Abandoned, "stopped before the attempt"
		return d
	}
	actx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
	defer cancel()

	ask, outcome, why := notice.Fetch(ctx, actx, n.cfg.Packets, ev.AskID)
	if ask == nil {
		d.Outcome, d.Err = outcome, why
		return d
	}
	now := n.cfg.Now()
	v := view{kind: ev.Kind, person: person, audience: ev.Audience, named: slices.Contains(ev.People, person), now: now}
	if v.withLink() && notice.Waiting(ask.GetState()) {
		link, exp, err := notice.PersonLink(n.cfg.Linker, ask, person, now)
		if err != nil {
			n.cfg.Log.WarnContext(ctx, "email: no single-use link; the message links the ask's page", "ask", ask.GetId(), "error", err)
			v.link, v.signIn = n.cfg.Linker.AskURL(ask.GetId()), true
		} else {
			v.link, v.linkExpires = link, exp
		}
	}
	msg, err := n.compose(ask, v, ev.ID, id, to)
	if err != nil {
		d.Outcome, d.Err = webhook.Rejected, "composing the message: "+err.Error()
		return d
	}
	code, err := n.send(actx, to, msg)
	d.Status = code
	if err != nil {
		d.Outcome, d.Err = n.classify(ctx, actx, err)
		return d
	}
	if ev.ID != "" {
		n.markSent(key)
	}
	d.Outcome = webhook.Delivered
	return d
}

// permanent is an error that no retry mends (the server as configured
// cannot take the message safely).
type permanent struct{ error }

// send speaks SMTP to the server: connect (TLS as configured), EHLO,
// STARTTLS, AUTH, MAIL, RCPT, DATA. It returns the last reply code seen
// and, when the message was not accepted, why. Every read and write is
// bounded by ctx's deadline, and ctx ending closes the connection.
func (n *Notifier) send(ctx context.Context, to string, msg []byte) (int, error) {
	dialer := &net.Dialer{Timeout: n.cfg.DialTimeout}
	conn, err := dialer.DialContext(ctx, "tcp", n.cfg.SMTPAddr)
	if err != nil {
		return 0, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	tlsConfig := &tls.Config{ServerName: n.cfg.ServerName, RootCAs: n.cfg.RootCAs, MinVersion: tls.VersionTLS12}
	if n.cfg.TLS == ImplicitTLS {
		tc := tls.Client(conn, tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return 0, fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, n.cfg.ServerName)
	if err != nil {
		conn.Close()
		return code(err), err
	}
	defer c.Close()
	if err := c.Hello(n.cfg.HelloName); err != nil {
		return code(err), err
	}
	if n.cfg.TLS == StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return 0, permanent{errors.New("the server does not offer STARTTLS; nothing is sent in clear")}
		}
		if err := c.StartTLS(tlsConfig); err != nil {
			return code(err), fmt.Errorf("STARTTLS: %w", err)
		}
	}
	if n.cfg.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return 0, permanent{errors.New("the server does not offer AUTH")}
		}
		if err := c.Auth(smtp.PlainAuth("", n.cfg.Username, n.cfg.Password, n.cfg.ServerName)); err != nil {
			return code(err), fmt.Errorf("AUTH: %w", err)
		}
	}
	if err := c.Mail(n.from.Address); err != nil {
		return code(err), fmt.Errorf("MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return code(err), fmt.Errorf("RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return code(err), fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return code(err), fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil { // reads the reply to the message
		return code(err), fmt.Errorf("DATA: %w", err)
	}
	_ = c.Quit() // the message was accepted: a failed QUIT changes nothing
	return 250, nil
}

// code is an SMTP error's reply code, or 0.
func code(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// classify turns an attempt's error into its outcome: 5xx and permanent
// are Rejected, everything else (4xx, network, timeout, TLS) Retrying.
func (n *Notifier) classify(ctx, actx context.Context, err error) (webhook.Outcome, string) {
	var p permanent
	c := code(err)
	switch {
	case ctx.Err() != nil:
		return webhook.Abandoned, "stopped during the attempt"
	case errors.As(err, &p):
		return webhook.Rejected, "smtp: " + p.Error()
	case c >= 500:
		return webhook.Rejected, "smtp: " + oneLine(err.Error())
	case c >= 400:
		return webhook.Retrying, "smtp: " + oneLine(err.Error())
	case actx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return webhook.Retrying, fmt.Sprintf("smtp: no answer within %s: %s", n.cfg.AttemptTimeout, oneLine(err.Error()))
	}
	return webhook.Retrying, "smtp: " + oneLine(err.Error())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// oneLine is s on one line, clipped: a server's reply goes into the
// journal.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return notice.Clip(s, 300)
}

func (n *Notifier) wasSent(key string) bool {
	_, ok := n.sent.Get(key)
	return ok
}

func (n *Notifier) markSent(key string) { n.sent.Add(key, struct{}{}) }
