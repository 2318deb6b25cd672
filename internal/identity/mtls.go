package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// DefaultTrustDomain is the SPIFFE trust domain of executors unless
// configured otherwise.
const DefaultTrustDomain = "tollgate"

// executorPath is the path prefix of an executor's SPIFFE ID:
// spiffe://TRUST_DOMAIN/executor/NAME.
const executorPath = "/executor/"

// ExecutorURI is the URI SAN an executor's client certificate carries.
func ExecutorURI(trustDomain, name string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: executorPath + name}
}

// ExecutorFromCert returns the executor name in cert's one URI SAN, which
// must read spiffe://trustDomain/executor/NAME with NAME a valid name (the
// rules of dev user names). A certificate with no URI SAN, several, another
// scheme or trust domain, or another path is refused: identity comes from
// the URI SAN only, never from the subject's common name.
func ExecutorFromCert(cert *x509.Certificate, trustDomain string) (string, error) {
	if cert == nil {
		return "", unauthenticated("no client certificate")
	}
	switch len(cert.URIs) {
	case 0:
		return "", unauthenticated("client certificate has no uri san")
	case 1:
	default:
		return "", unauthenticated("client certificate has more than one uri san")
	}
	u := cert.URIs[0]
	if u.Scheme != "spiffe" || u.Host != trustDomain || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", unauthenticated("uri san is not in trust domain " + trustDomain)
	}
	name, ok := strings.CutPrefix(u.Path, executorPath)
	if !ok || !validDevUser(name) {
		return "", unauthenticated("uri san does not name an executor")
	}
	return name, nil
}

// peerExecutor authenticates the executor of the RPC in ctx from the
// verified chain of its TLS connection.
func peerExecutor(ctx context.Context, trustDomain string) (Principal, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return Principal{}, unauthenticated("no transport credentials")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return Principal{}, unauthenticated("connection is not tls")
	}
	// VerifiedChains is only filled when the server verified the client
	// certificate against its client CAs; PeerCertificates alone prove
	// nothing.
	if len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Principal{}, unauthenticated("client certificate not verified")
	}
	name, err := ExecutorFromCert(info.State.VerifiedChains[0][0], trustDomain)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Subject: name, Kind: KindExecutor, Issuer: "spiffe://" + trustDomain}, nil
}

// ExecutorStreamInterceptor authenticates every stream of an executor
// listener by its client certificate (see [ExecutorFromCert]) and puts a
// [KindExecutor] Principal in the handler's context. Bearer tokens are not
// consulted: an executor listener takes certificates only. Failures are
// codes.Unauthenticated with the reason as message.
func ExecutorStreamInterceptor(trustDomain string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		p, err := peerExecutor(ss.Context(), trustDomain)
		if err != nil {
			return status.Error(codes.Unauthenticated, reasonOf(err))
		}
		return handler(srv, &authedStream{ServerStream: ss, ctx: WithPrincipal(ss.Context(), p)})
	}
}

// ExecutorUnaryInterceptor is the unary counterpart of
// [ExecutorStreamInterceptor].
func ExecutorUnaryInterceptor(trustDomain string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		p, err := peerExecutor(ctx, trustDomain)
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, reasonOf(err))
		}
		return handler(WithPrincipal(ctx, p), req)
	}
}

// ServerTLS is the TLS config of an executor listener: the server's
// certificate (read again when its files change: KeyPair; failed hears of
// a new pair that does not load, nil: nobody), TLS 1.3, and a client
// certificate required and verified against the CA bundle in caFile
// (read once).
func ServerTLS(certFile, keyFile, caFile string, failed func(error)) (*tls.Config, error) {
	pair, err := NewKeyPair(KeyPairConfig{CertFile: certFile, KeyFile: keyFile, Failed: failed})
	if err != nil {
		return nil, err
	}
	pool, err := loadCAPool(caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{GetCertificate: pair.GetCertificate, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}, nil
}

// APITLS is the API listener's TLS config: server authentication only
// (callers prove who they are with bearer tokens), the pair read again
// when its files change (KeyPair), TLS 1.2 or later.
func APITLS(certFile, keyFile string, failed func(error)) (*tls.Config, error) {
	pair, err := NewKeyPair(KeyPairConfig{CertFile: certFile, KeyFile: keyFile, Failed: failed})
	if err != nil {
		return nil, err
	}
	return &tls.Config{GetCertificate: pair.GetCertificate, MinVersion: tls.VersionTLS12}, nil
}

// ClientTLS is an executor's TLS config: its client certificate, and the
// CA bundle in caFile as the only roots the control plane's certificate
// may chain to. serverName, when set, overrides the name checked against
// the server's certificate (default: the host of the dialled address).
func ClientTLS(certFile, keyFile, caFile, serverName string) (*tls.Config, error) {
	cert, pool, err := loadPair(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS13}, nil
}

func loadPair(certFile, keyFile, caFile string) (tls.Certificate, *x509.CertPool, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return tls.Certificate{}, nil, fmt.Errorf("%w: tls needs a certificate, its key and a ca file", ErrInvalidConfig)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%w: load certificate %s: %v", ErrInvalidConfig, certFile, err)
	}
	pool, err := loadCAPool(caFile)
	return cert, pool, err
}

func loadCAPool(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, fmt.Errorf("%w: tls needs a ca file", ErrInvalidConfig)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: read ca: %v", ErrInvalidConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: ca %s holds no pem certificate", ErrInvalidConfig, caFile)
	}
	return pool, nil
}
