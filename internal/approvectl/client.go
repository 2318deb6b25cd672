package approvectl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// globals are the flags every verb shares.
type globals struct {
	server     string
	token      string
	as         string
	output     string
	ca         string // --ca: TLS with these roots, loopback too
	serverName string // --tls-server-name
	cfg        Config
}

// DefaultServer is where a --dev control plane listens.
const DefaultServer = "127.0.0.1:7443"

func (g *globals) json() bool { return g.output == "json" }

// home is $TOLLGATE_HOME or ~/.tollgate.
func (g *globals) home() string {
	if h := g.cfg.Getenv("TOLLGATE_HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return filepath.Join(h, ".tollgate")
}

// bearer finds the caller's token: --token, then --as NAME (the dev
// tokens), then $TOLLGATE_TOKEN, then the token approvectl login cached
// for server (refreshed when it is about to expire).
func (g *globals) bearer(ctx context.Context, server string) (string, error) {
	tok, _, err := g.bearerFrom(ctx, server)
	return tok, err
}

// bearerFrom is bearer, and says where the token came from.
func (g *globals) bearerFrom(ctx context.Context, server string) (tok, source string, err error) {
	switch {
	case g.token != "":
		return g.token, "--token", nil
	case g.as != "":
		path := filepath.Join(g.home(), "dev", "tokens", g.as+".jwt")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", "", usageErr("--as %s: no dev token at %s (is a --dev control plane running with the same TOLLGATE_HOME?)", g.as, path)
		}
		return strings.TrimSpace(string(b)), "--as " + g.as, nil
	case g.cfg.Getenv("TOLLGATE_TOKEN") != "":
		return strings.TrimSpace(g.cfg.Getenv("TOLLGATE_TOKEN")), "$TOLLGATE_TOKEN", nil
	}
	tok, err = g.cachedBearer(ctx, server)
	switch {
	case errors.Is(err, errNoCachedToken):
		return "", "", usageErr("who are you? run approvectl login --issuer URL, pass --token, set TOLLGATE_TOKEN, or use --as NAME with a --dev control plane")
	case err != nil:
		return "", "", &exitError{code: ExitRefused, err: err}
	}
	c, _ := g.tokenCache()
	return tok, "cache " + c.path(server), nil
}

// serverAddr is the control plane chosen: --server, $TOLLGATE_SERVER, or
// DefaultServer.
func (g *globals) serverAddr() string {
	server := g.server
	if server == "" {
		server = g.cfg.Getenv("TOLLGATE_SERVER")
	}
	if server == "" {
		server = DefaultServer
	}
	return server
}

// client dials the control plane. Loopback servers are reached without
// TLS; anything else requires it.
type client struct {
	server    string // the address dialled, for messages
	conn      *grpc.ClientConn
	runs      tollgatev1.RunServiceClient
	approvals tollgatev1.ApprovalServiceClient
	audit     tollgatev1.AuditServiceClient
	skills    tollgatev1.SkillServiceClient
	schedules tollgatev1.ScheduleServiceClient
	// reached is set once a call got through to the control plane
	// (noteUnary): its UNAVAILABLE is then the control plane's answer.
	reached atomic.Bool
}

func (g *globals) dial(ctx context.Context) (*client, error) {
	server := g.serverAddr()
	tok, err := g.bearer(ctx, server)
	if err != nil {
		return nil, err
	}
	tr := identity.Transport{CAFile: g.ca, ServerName: g.serverName}
	if tr.CAFile == "" {
		tr.CAFile = g.cfg.Getenv("TOLLGATE_CA")
	}
	if tr.ServerName == "" {
		tr.ServerName = g.cfg.Getenv("TOLLGATE_TLS_SERVER_NAME")
	}
	opts, err := identity.DialOptions(server, tok, tr)
	if err != nil {
		return nil, usageErr("--server: %v", err)
	}
	c := &client{server: server}
	opts = append(opts, grpc.WithChainUnaryInterceptor(c.noteUnary), grpc.WithChainStreamInterceptor(c.noteStream))
	conn, err := grpc.NewClient(server, opts...)
	if err != nil {
		return nil, &exitError{code: ExitInternal, err: fmt.Errorf("connect to %s: %w", server, err)}
	}
	c.conn, c.runs, c.approvals, c.audit = conn, tollgatev1.NewRunServiceClient(conn), tollgatev1.NewApprovalServiceClient(conn), tollgatev1.NewAuditServiceClient(conn)
	c.skills, c.schedules = tollgatev1.NewSkillServiceClient(conn), tollgatev1.NewScheduleServiceClient(conn)
	return c, nil
}

// noteUnary records whether a call reached the control plane: a call
// that got a transport stream has a peer, whatever status it ended with;
// one refused before (no connection) has none.
func (c *client) noteUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if p.Addr != nil {
		c.reached.Store(true)
	}
	return err
}

// noteStream is noteUnary for streams: a stream whose receive returned
// (a message or a status) over a transport stream reached it.
func (c *client) noteStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &notedStream{ClientStream: s, c: c}, nil
}

type notedStream struct {
	grpc.ClientStream
	c *client
}

func (s *notedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if _, ok := peer.FromContext(s.Context()); ok {
		s.c.reached.Store(true)
	}
	return err
}

// session dials the control plane as the caller, runs use on the
// connection and closes it: the one way a verb talks to the control
// plane. A dial error is returned as it is (exit 2 for a missing token or
// a bad --server, 3 for a failed connect); use maps the errors of its
// calls with rpcErr.
func (g *globals) session(cmd *cobra.Command, use func(ctx context.Context, c *client) error) error {
	c, err := g.dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.conn.Close()
	return c.reachable(use(cmd.Context(), c))
}

// reachable turns err, the error of a session's calls, into "cannot
// reach the control plane" when the calls never got through: an
// UNAVAILABLE status of calls none of which reached it (refused, no
// route, a TLS handshake that failed) is the transport's, not the control
// plane's answer. A control plane that answered UNAVAILABLE (its store is
// away) was reached, and says so itself. Exit 3, as every call that did
// not get through.
func (c *client) reachable(err error) error {
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != ExitInternal || ee.printed {
		return err
	}
	var ue unavailable
	if !errors.As(err, &ue) || c.reached.Load() {
		return err
	}
	return &exitError{code: ExitInternal, err: fmt.Errorf("cannot reach the control plane at %s: is it running (controlplane --dev)? check --server / $TOLLGATE_SERVER\n  cause: %s", c.server, ue.msg)}
}

// unavailable is an UNAVAILABLE status, kept so a session can tell a
// control plane that could not be reached from one that answered.
type unavailable struct{ msg string }

func (u unavailable) Error() string { return "unavailable: " + u.msg }

// fetch makes the one call rpc makes in a session of its own; its error
// is mapped by rpcErr.
func fetch[R any](g *globals, cmd *cobra.Command, rpc func(ctx context.Context, c *client) (R, error)) (R, error) {
	var resp R
	err := g.session(cmd, func(ctx context.Context, c *client) error {
		var err error
		resp, err = rpc(ctx, c)
		return rpcErr(err)
	})
	return resp, err
}

// call is the road of a verb that makes one call and prints its answer:
// fetch it, then print asJSON's value under -o json (the shape scripts
// read), else text for people.
func call[R any](g *globals, cmd *cobra.Command, rpc func(ctx context.Context, c *client) (R, error), asJSON func(R) any, text func(w io.Writer, resp R) error) error {
	resp, err := fetch(g, cmd, rpc)
	if err != nil {
		return err
	}
	if g.json() {
		return g.printJSON(asJSON(resp))
	}
	return text(g.cfg.Stdout, resp)
}

// rpcErr turns a gRPC error into an exit code scripts can trust: the
// server said no (refused, 1) or the call did not get through (3).
func rpcErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return &exitError{code: ExitInternal, err: err}
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		return &exitError{code: ExitInternal, err: unavailable{st.Message()}}
	case codes.DeadlineExceeded, codes.Internal, codes.Unknown:
		return &exitError{code: ExitInternal, err: fmt.Errorf("%s: %s", strings.ToLower(st.Code().String()), st.Message())}
	case codes.Unauthenticated:
		return &exitError{code: ExitRefused, err: errors.New(labelled("not signed in", st.Message()))}
	case codes.PermissionDenied:
		return &exitError{code: ExitRefused, err: errors.New(labelled("permission denied", st.Message()))}
	case codes.NotFound:
		return &exitError{code: ExitRefused, err: errors.New(labelled("not found", st.Message()))}
	}
	return &exitError{code: ExitRefused, err: errors.New(st.Message())}
}

// labelled puts label in front of msg, once: a server message that says
// it already — at its end ("run r_1: not found"), its start, or between
// the reason and its cause ("bob may not: permission denied: over the
// limit", the way an error kind wraps another error) — does not say it
// twice. The code of the status is the kind; the label says it.
func labelled(label, msg string) string {
	msg = strings.TrimPrefix(msg, label+": ")
	msg = strings.TrimSuffix(msg, ": "+label)
	msg = strings.ReplaceAll(msg, ": "+label+": ", ": ")
	if msg == label || msg == "" {
		return label
	}
	return label + ": " + msg
}

// printJSON writes v as indented JSON.
func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.cfg.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSONLine writes v as one line of JSON (for streams: one object per
// line).
func (g *globals) printJSONLine(v any) error {
	enc := json.NewEncoder(g.cfg.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
