package emailnotify

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/smtp"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Endpoints names the endpoints that want ev: EndpointPrefix and a person,
// for each person ev names (Event.People, then Event.Audience when it is a
// person) who has an address now, once each. Every kind of event: an
// opened, reminder or escalated notice carries the person's link; a
// decided or expired one says how the ask ended, with no link.
func (n *Notifier) Endpoints(ev webhook.Event) []string {
	if !webhook.KnownKind(ev.Kind) || ev.AskID == "" {
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
	var ev webhook.Event
	if err := json.Unmarshal(raw, &ev); err != nil || !webhook.KnownKind(ev.Kind) || ev.AskID == "" {
		d := webhook.Delivery{EventID: ev.ID, Endpoint: endpoint, Kind: ev.Kind, AskID: ev.AskID, Outcome: webhook.Rejected, Err: "not an event this sender can deliver", At: n.cfg.Now(), Final: true}
		n.record(ctx, rec, d)
		return d
	}
	base := webhook.Delivery{EventID: ev.ID, Endpoint: endpoint, Kind: ev.Kind, AskID: ev.AskID}
	person, _ := strings.CutPrefix(endpoint, EndpointPrefix)
	to, ok := n.address(person)
	if !strings.HasPrefix(endpoint, EndpointPrefix) || !ok {
		d := base
		d.Outcome, d.Err, d.At, d.Final = webhook.Dropped, fmt.Sprintf("no email address for endpoint %q", endpoint), n.cfg.Now(), true
		n.record(ctx, rec, d)
		return d
	}
	for attempt := 1; ; attempt++ {
		d := n.attempt(ctx, ev, endpoint, person, to)
		d.EventID, d.Endpoint, d.Kind, d.AskID, d.Attempt = base.EventID, base.Endpoint, base.Kind, base.AskID, attempt
		switch {
		case d.Outcome == webhook.Abandoned:
			d.Final = false
			return d
		case d.Outcome != webhook.Retrying:
			d.Final = true
			n.record(ctx, rec, d)
			return d
		case attempt >= n.cfg.MaxAttempts:
			d.Outcome, d.Final = webhook.Failed, true
			d.Err += fmt.Sprintf(" (attempt %d of %d)", attempt, n.cfg.MaxAttempts)
			n.record(ctx, rec, d)
			return d
		}
		d.RetryIn = n.retryDelay(attempt)
		n.record(ctx, rec, d)
		t := time.NewTimer(d.RetryIn)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return webhook.Delivery{EventID: base.EventID, Endpoint: endpoint, Kind: ev.Kind, AskID: ev.AskID, Attempt: attempt,
				Outcome: webhook.Abandoned, Err: "stopped before the delivery was final", At: n.cfg.Now()}
		}
	}
}

// attempt makes one attempt: read the packet, compose, send.
func (n *Notifier) attempt(ctx context.Context, ev webhook.Event, endpoint, person, to string) (d webhook.Delivery) {
	id := newID("eml_")
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

	ask, err := n.cfg.Packets.Packet(actx, ev.AskID)
	if err == nil && ask == nil {
		err = ErrNoAsk
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			d.Outcome, d.Err = webhook.Abandoned, "stopped during the attempt"
		case errors.Is(err, ErrNoAsk) || status.Code(err) == codes.NotFound:
			d.Outcome, d.Err = webhook.Rejected, "ask not found"
		default:
			d.Outcome, d.Err = webhook.Retrying, "reading the ask: "+err.Error()
		}
		return d
	}
	now := n.cfg.Now()
	v := view{kind: ev.Kind, person: person, audience: ev.Audience, named: slices.Contains(ev.People, person), now: now}
	if v.withLink() && openState(ask.GetState()) {
		exp := now.Add(24 * time.Hour)
		if e := ask.GetExpiresAt(); e != nil {
			exp = e.AsTime()
		}
		link, err := n.cfg.Linker.PersonLink(ask.GetId(), person, exp)
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
	return clip(s, 300)
}

// retryDelay is the wait after attempt failed: BaseBackoff·2^(attempt-1)
// with equal jitter, capped at MaxBackoff.
func (n *Notifier) retryDelay(attempt int) time.Duration {
	d := n.cfg.BaseBackoff
	for i := 1; i < attempt && d < n.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, n.cfg.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// record hands d to rec and logs it.
func (n *Notifier) record(ctx context.Context, rec webhook.Recorder, d webhook.Delivery) {
	attrs := []any{"endpoint", d.Endpoint, "kind", d.Kind, "ask", d.AskID, "event", d.EventID, "attempt", d.Attempt, "outcome", string(d.Outcome)}
	if d.Err != "" {
		attrs = append(attrs, "err", d.Err)
	}
	if d.Outcome == webhook.Delivered {
		n.cfg.Log.DebugContext(ctx, "email notice delivered", attrs...)
	} else {
		n.cfg.Log.WarnContext(ctx, "email notice not delivered", attrs...)
	}
	if rec == nil {
		return
	}
	if err := rec.Delivered(ctx, d); err != nil {
		n.cfg.Log.WarnContext(ctx, "email delivery not recorded", append(attrs, "error", err)...)
	}
}

func (n *Notifier) wasSent(key string) bool {
	_, ok := n.sent.Get(key)
	return ok
}

func (n *Notifier) markSent(key string) { n.sent.Add(key, struct{}{}) }

// newID returns prefix and 32 random hex digits.
func newID(prefix string) string {
	var b [16]byte
	crand.Read(b[:]) // never fails
	return prefix + hex.EncodeToString(b[:])
}
