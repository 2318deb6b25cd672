package identity

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// authorizationKey is the metadata key carrying "Bearer <token>".
const authorizationKey = "authorization"

// InterceptorOptions configures the server interceptors.
//
// SkipMethods lists full gRPC method names ("/package.Service/Method", e.g.
// "/grpc.health.v1.Health/Check") that are served without authentication;
// their handlers see no Principal. Everything else requires a valid token.
type InterceptorOptions struct {
	SkipMethods []string
}

// skipSet merges the SkipMethods of opts.
func skipSet(opts []InterceptorOptions) map[string]bool {
	set := make(map[string]bool)
	for _, o := range opts {
		for _, m := range o.SkipMethods {
			set[m] = true
		}
	}
	return set
}

// authenticate reads the bearer token from ctx's incoming metadata, verifies
// it and returns ctx carrying the Principal, or a gRPC Unauthenticated status
// error whose message is the reason (never the token).
func authenticate(ctx context.Context, v *Verifier) (context.Context, error) {
	token, err := bearerToken(ctx)
	if err == nil {
		var p Principal
		if p, err = v.Verify(ctx, token); err == nil {
			return WithPrincipal(ctx, p), nil
		}
	}
	return nil, status.Error(codes.Unauthenticated, reasonOf(err))
}

// bearerToken extracts the token of the single "authorization: Bearer
// <token>" entry of ctx's incoming metadata.
func bearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(authorizationKey)
	switch len(vals) {
	case 0:
		return "", unauthenticated("missing bearer token")
	case 1:
	default:
		return "", unauthenticated("more than one authorization header")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", unauthenticated("authorization scheme must be bearer")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", unauthenticated("missing bearer token")
	}
	return token, nil
}

// UnaryServerInterceptor returns an interceptor that authenticates every
// unary RPC (except opts' SkipMethods) with v: the "authorization: Bearer
// <token>" metadata entry must hold a token v accepts. On success the handler
// runs with the Principal in its context ([FromContext]); otherwise the RPC
// fails with codes.Unauthenticated and the reason as message, and the
// handler does not run. It panics if v is nil.
func UnaryServerInterceptor(v *Verifier, opts ...InterceptorOptions) grpc.UnaryServerInterceptor {
	if v == nil {
		panic("identity: UnaryServerInterceptor with nil Verifier")
	}
	skip := skipSet(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if skip[info.FullMethod] {
			return handler(ctx, req)
		}
		ctx, err := authenticate(ctx, v)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is the streaming counterpart of
// [UnaryServerInterceptor], with the same contract: the token is checked once
// when the stream opens, and the handler's stream.Context() carries the
// Principal. It panics if v is nil.
func StreamServerInterceptor(v *Verifier, opts ...InterceptorOptions) grpc.StreamServerInterceptor {
	if v == nil {
		panic("identity: StreamServerInterceptor with nil Verifier")
	}
	skip := skipSet(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if skip[info.FullMethod] {
			return handler(srv, ss)
		}
		ctx, err := authenticate(ss.Context(), v)
		if err != nil {
			return err
		}
		return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
	}
}

// authedStream is a ServerStream whose Context carries the Principal.
type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

// PerRPCCredentials attaches "authorization: Bearer <Token>" to every RPC of
// a client connection (pass it to grpc.WithPerRPCCredentials).
//
// By default it requires transport security, so gRPC refuses to use it on an
// insecure connection. Insecure set to true is for loopback development only:
// it lets the token travel without TLS, but only to a loopback authority
// ("localhost", 127.0.0.0/8, ::1); to any other host an insecure connection
// gets an error instead of the token. The zero Token is an error on every
// RPC. Printing a PerRPCCredentials with fmt never shows the token.
type PerRPCCredentials struct {
	Token    string
	Insecure bool
}

var _ credentials.PerRPCCredentials = PerRPCCredentials{}

// GetRequestMetadata implements credentials.PerRPCCredentials: it returns the
// authorization entry, or an error if the token is empty or, for Insecure
// credentials, the connection has no transport security and uri's host is
// not loopback.
func (c PerRPCCredentials) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	if c.Token == "" {
		return nil, errors.New("identity: empty bearer token")
	}
	if c.Insecure && !transportSecure(ctx) && !allLoopback(uri) {
		return nil, errors.New("identity: refusing to send a bearer token without transport security to a non-loopback host")
	}
	return map[string]string{authorizationKey: "Bearer " + c.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: true
// unless Insecure is set.
func (c PerRPCCredentials) RequireTransportSecurity() bool { return !c.Insecure }

// String redacts the token.
func (c PerRPCCredentials) String() string {
	if c.Insecure {
		return "identity.PerRPCCredentials{Token: <redacted>, Insecure: true}"
	}
	return "identity.PerRPCCredentials{Token: <redacted>}"
}

// GoString redacts the token from %#v.
func (c PerRPCCredentials) GoString() string { return c.String() }

// transportSecure reports whether the RPC in ctx runs over a connection with
// privacy and integrity.
func transportSecure(ctx context.Context) bool {
	ri, ok := credentials.RequestInfoFromContext(ctx)
	if !ok || ri.AuthInfo == nil {
		return false
	}
	return credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity) == nil
}

// allLoopback reports whether uris is not empty and every host in it is
// loopback.
func allLoopback(uris []string) bool {
	for _, u := range uris {
		if !loopbackURI(u) {
			return false
		}
	}
	return len(uris) > 0
}

// loopbackURI reports whether u's host is a loopback name or address.
func loopbackURI(u string) bool {
	parsed, err := url.Parse(u)
	if err != nil {
		return false
	}
	return loopbackHost(parsed.Hostname())
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Loopback reports whether addr (HOST:PORT) names this machine's loopback
// interface; it is false for anything it cannot parse.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}

// Transport says how a client reaches a server beyond the default rule.
type Transport struct {
	// CAFile, if set, is a CA bundle (PEM): the client speaks TLS to any
	// address, loopback too (a kubectl port-forward to a TLS listener),
	// and trusts only these roots.
	CAFile string
	// ServerName, if set, is the name checked against the server's
	// certificate instead of the dialled host (localhost through a
	// port-forward, a Service's name on the certificate).
	ServerName string
}

// DialOptions are how every Tollgate client reaches a server at addr with
// a bearer token: TLS (system roots) to anything but loopback; on loopback,
// plain TCP, which only --dev servers listen on — unless t names a CA,
// then TLS with those roots everywhere.
func DialOptions(addr, token string, t Transport) ([]grpc.DialOption, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("address %q: want HOST:PORT", addr)
	}
	plain := Loopback(addr) && t.CAFile == ""
	creds := insecure.NewCredentials()
	switch {
	case t.CAFile != "":
		pool, err := loadCAPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: t.ServerName, MinVersion: tls.VersionTLS12})
	case !plain:
		creds = credentials.NewClientTLSFromCert(nil, t.ServerName)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(PerRPCCredentials{Token: token, Insecure: plain}),
		// The one message limit every Tollgate sender and receiver shares.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limits.MaxMessageBytes), grpc.MaxCallSendMsgSize(limits.MaxMessageBytes))}, nil
}
