package identity

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	methodCheck = "/grpc.health.v1.Health/Check"
	methodWatch = "/grpc.health.v1.Health/Watch"
)

// seen is what a handler of recordingHealth observed in its context.
type seen struct {
	method string
	p      Principal
	ok     bool
}

// recordingHealth is the standard health service, with handlers that report
// the Principal their context carries before doing the real work.
type recordingHealth struct {
	*health.Server
	seen chan seen
}

func (h *recordingHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	p, ok := FromContext(ctx)
	h.seen <- seen{methodCheck, p, ok}
	return h.Server.Check(ctx, req)
}

func (h *recordingHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	p, ok := FromContext(stream.Context())
	h.seen <- seen{methodWatch, p, ok}
	return h.Server.Watch(req, stream)
}

// noHandlerRan fails the test if any handler of h ran.
func (h *recordingHealth) noHandlerRan(t *testing.T) {
	t.Helper()
	select {
	case s := <-h.seen:
		t.Fatalf("handler %s ran (principal %+v)", s.method, s.p)
	default:
	}
}

// serveHealth starts a real gRPC server on loopback TCP with the identity
// interceptors and the health service, and returns a health client on an
// insecure loopback connection (without credentials of its own).
func serveHealth(t *testing.T, v *Verifier, opts InterceptorOptions) (healthpb.HealthClient, *recordingHealth) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(v, opts)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(v, opts)),
	)
	rec := &recordingHealth{Server: health.NewServer(), seen: make(chan seen, 64)}
	healthpb.RegisterHealthServer(srv, rec)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-done
	})
	return healthpb.NewHealthClient(conn), rec
}

func bearer(token string) grpc.CallOption {
	return grpc.PerRPCCredentials(PerRPCCredentials{Token: token, Insecure: true})
}

func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code || (msg != "" && st.Message() != msg) {
		t.Fatalf("%s: error %v, want %v %q", what, err, code, msg)
	}
}

func TestGRPCRejects(t *testing.T) {
	pub, priv := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": pub})
	client, rec := serveHealth(t, v, InterceptorOptions{})

	expired, _ := Mint(priv, "k1", testIssuer, testAudience, "alice", time.Minute, t0.Add(-time.Hour))
	wrongAud, _ := Mint(priv, "k1", testIssuer, "another-api", "alice", time.Hour, t0)
	algNone := craft(t, map[string]any{"alg": "none", "typ": "JWT"}, goodClaims(), nil)
	hs256 := sign(t, jwt.SigningMethodHS256, []byte(pub), "k1", goodClaims())

	cases := []struct {
		name   string
		ctx    func(context.Context) context.Context
		opts   []grpc.CallOption
		reason string
		token  string
	}{
		{name: "no token", reason: "missing bearer token"},
		{name: "expired", opts: []grpc.CallOption{bearer(expired)}, reason: "token expired", token: expired},
		{name: "wrong audience", opts: []grpc.CallOption{bearer(wrongAud)}, reason: "wrong audience", token: wrongAud},
		{name: "alg none", opts: []grpc.CallOption{bearer(algNone)}, reason: "unsupported algorithm EdDSA only", token: algNone},
		{name: "HS256 with public key", opts: []grpc.CallOption{bearer(hs256)}, reason: "unsupported algorithm EdDSA only", token: hs256},
		{name: "basic scheme", reason: "authorization scheme must be bearer", ctx: func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic YWxpY2U6cHc=")
		}},
		{name: "empty bearer", reason: "missing bearer token", ctx: func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer ")
		}},
		{name: "two authorization headers", reason: "more than one authorization header", ctx: func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer a", "authorization", "Bearer b")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, tc.opts...)
			wantCode(t, "Check", err, codes.Unauthenticated, tc.reason)
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Fatal("Check error contains the token")
			}

			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{}, tc.opts...)
			if err == nil {
				_, err = stream.Recv()
			}
			wantCode(t, "Watch", err, codes.Unauthenticated, tc.reason)
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Fatal("Watch error contains the token")
			}
			rec.noHandlerRan(t)
		})
	}
}

func TestGRPCAccepts(t *testing.T) {
	pub, priv := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": pub})
	client, rec := serveHealth(t, v, InterceptorOptions{})
	token, err := Mint(priv, "k1", testIssuer, testAudience, "alice", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := Principal{Subject: "alice", Kind: KindPerson, Issuer: testIssuer}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, bearer(token))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check status %v", resp.GetStatus())
	}
	if s := <-rec.seen; s.method != methodCheck || !s.ok || !reflect.DeepEqual(s.p, want) {
		t.Fatalf("Check handler saw %+v, want %+v", s, want)
	}

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	stream, err := client.Watch(wctx, &healthpb.HealthCheckRequest{}, bearer(token))
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatalf("Watch Recv: %v", err)
	}
	if msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch status %v", msg.GetStatus())
	}
	if s := <-rec.seen; s.method != methodWatch || !s.ok || !reflect.DeepEqual(s.p, want) {
		t.Fatalf("Watch handler saw %+v, want %+v", s, want)
	}
	wcancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Watch Recv after cancel: %v, want Canceled", err)
	}
}

// A connection-wide PerRPCCredentials (grpc.WithPerRPCCredentials) marked
// Insecure authenticates every call on a loopback connection.
func TestGRPCDialCredentials(t *testing.T) {
	pub, priv := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": pub})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(UnaryServerInterceptor(v)))
	rec := &recordingHealth{Server: health.NewServer(), seen: make(chan seen, 4)}
	healthpb.RegisterHealthServer(srv, rec)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()

	token, _ := Mint(priv, "k1", testIssuer, testAudience, "svc-1", time.Hour, t0)
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(PerRPCCredentials{Token: token, Insecure: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if s := <-rec.seen; !s.ok || s.p.Subject != "svc-1" {
		t.Fatalf("handler saw %+v", s)
	}

	// Without Insecure, gRPC refuses the credentials on an insecure connection.
	if c, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(PerRPCCredentials{Token: token})); err == nil {
		c.Close()
		t.Fatal("NewClient accepted secure-only credentials on an insecure connection")
	}
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{},
		grpc.PerRPCCredentials(PerRPCCredentials{Token: token}))
	if err == nil {
		t.Fatal("call with secure-only credentials succeeded on an insecure connection")
	}
	rec.noHandlerRan(t)
}

func TestGRPCSkipMethods(t *testing.T) {
	pub, _ := newKey(t)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": pub})
	client, rec := serveHealth(t, v, InterceptorOptions{SkipMethods: []string{methodCheck}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("skipped Check without a token: %v", err)
	}
	if s := <-rec.seen; s.ok {
		t.Fatalf("skipped Check handler saw a principal %+v", s.p)
	}
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, "Watch", err, codes.Unauthenticated, "missing bearer token")
	rec.noHandlerRan(t)
}

// testAuthInfo is a transport AuthInfo with a chosen security level.
type testAuthInfo struct{ credentials.CommonAuthInfo }

func (testAuthInfo) AuthType() string { return "test" }

func TestPerRPCCredentials(t *testing.T) {
	const token = "header.payload.signature"
	insecureCtx := credentials.NewContextWithRequestInfo(context.Background(), credentials.RequestInfo{
		AuthInfo: testAuthInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}},
	})
	secureCtx := credentials.NewContextWithRequestInfo(context.Background(), credentials.RequestInfo{
		AuthInfo: testAuthInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}},
	})
	cases := []struct {
		name  string
		creds PerRPCCredentials
		ctx   context.Context
		uri   []string
		ok    bool
	}{
		{"insecure to 127.0.0.1", PerRPCCredentials{token, true}, insecureCtx, []string{"https://127.0.0.1:5000/grpc.health.v1.Health"}, true},
		{"insecure to ::1", PerRPCCredentials{token, true}, insecureCtx, []string{"https://[::1]:5000/x.Y"}, true},
		{"insecure to localhost", PerRPCCredentials{token, true}, insecureCtx, []string{"https://localhost/x.Y"}, true},
		{"insecure to a remote host", PerRPCCredentials{token, true}, insecureCtx, []string{"https://tollgate.example.com/x.Y"}, false},
		{"insecure to a remote address", PerRPCCredentials{token, true}, insecureCtx, []string{"https://10.0.0.1:443/x.Y"}, false},
		{"insecure without request info", PerRPCCredentials{token, true}, context.Background(), []string{"https://tollgate.example.com/x.Y"}, false},
		{"insecure without uri", PerRPCCredentials{token, true}, insecureCtx, nil, false},
		{"insecure flag over TLS", PerRPCCredentials{token, true}, secureCtx, []string{"https://tollgate.example.com/x.Y"}, true},
		{"secure", PerRPCCredentials{token, false}, secureCtx, []string{"https://tollgate.example.com/x.Y"}, true},
		{"empty token", PerRPCCredentials{"", false}, secureCtx, []string{"https://tollgate.example.com/x.Y"}, false},
	}
	for _, tc := range cases {
		md, err := tc.creds.GetRequestMetadata(tc.ctx, tc.uri...)
		if !tc.ok {
			if err == nil {
				t.Errorf("%s: GetRequestMetadata = %v, want an error", tc.name, md)
			} else if strings.Contains(err.Error(), token) {
				t.Errorf("%s: error contains the token", tc.name)
			}
			continue
		}
		if err != nil || len(md) != 1 || md["authorization"] != "Bearer "+token {
			t.Errorf("%s: GetRequestMetadata = %v, %v", tc.name, md, err)
		}
	}
	if (PerRPCCredentials{Token: token}).RequireTransportSecurity() != true {
		t.Error("default credentials do not require transport security")
	}
	if (PerRPCCredentials{Token: token, Insecure: true}).RequireTransportSecurity() != false {
		t.Error("Insecure credentials require transport security")
	}
	c := PerRPCCredentials{Token: token, Insecure: true}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(verb, c); strings.Contains(s, token) {
			t.Errorf("%s prints the token: %s", verb, s)
		}
	}
}

func TestInterceptorsNilVerifierPanics(t *testing.T) {
	for name, build := range map[string]func(){
		"unary":  func() { UnaryServerInterceptor(nil) },
		"stream": func() { StreamServerInterceptor(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic for a nil Verifier", name)
				}
			}()
			build()
		}()
	}
}
