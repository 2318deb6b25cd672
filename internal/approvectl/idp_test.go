package approvectl

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// A real OpenID provider on loopback for approvectl login's tests: the
// zitadel/oidc example OP (device flow, code + PKCE, refresh) over a
// storage that adds a groups claim and makes "approvectl" a public
// native client with the device grant. Condensed from the issue-18 probe
// (/work/notes/issue18-probe); internal/oidctest grows the full provider
// (key rotation, ES256) for the server side.

type idpUsers map[string]*storage.User

func (u idpUsers) GetUserByID(id string) *storage.User { return u[id] }
func (u idpUsers) GetUserByUsername(n string) *storage.User {
	for _, x := range u {
		if x.Username == n {
			return x
		}
	}
	return nil
}
func (u idpUsers) ExampleClientID() string { return "service" }

type idpKey struct {
	id   string
	priv *rsa.PrivateKey
}

func (k *idpKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *idpKey) Key() any                                    { return k.priv }
func (k *idpKey) ID() string                                  { return k.id }

type idpPubKey struct{ *idpKey }

func (k idpPubKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k idpPubKey) Use() string                        { return "sig" }
func (k idpPubKey) Key() any                           { return &k.priv.PublicKey }

type idpStorage struct {
	*storage.Storage
	key    *idpKey
	mu     sync.Mutex
	groups map[string][]string
}

func (s *idpStorage) SigningKey(context.Context) (op.SigningKey, error) { return s.key, nil }
func (s *idpStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *idpStorage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{idpPubKey{s.key}}, nil
}

func (s *idpStorage) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, tr op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, tr, scopes); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ui.AppendClaims("groups", s.groups[tr.GetSubject()])
	return nil
}

// cliClient is the public native client approvectl with the device grant
// too (the example's NativeClient has code and refresh only).
type cliClient struct{ op.Client }

func (cliClient) GrantTypes() []zoidc.GrantType {
	return []zoidc.GrantType{zoidc.GrantTypeCode, zoidc.GrantTypeRefreshToken, zoidc.GrantTypeDeviceCode}
}

func (s *idpStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil || id != DefaultClientID {
		return c, err
	}
	return cliClient{c}, nil
}

// CreateAccessAndRefreshTokens gives a device-grant token the client id
// the example storage leaves out (its getInfoFromRequest knows only the
// code and refresh requests), without which the refresh token it issues
// is refused for the wrong client.
func (s *idpStorage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	switch req.(type) {
	case *storage.AuthRequest, *storage.RefreshTokenRequest, op.TokenExchangeRequest:
	default:
		req = &storage.AuthRequest{ApplicationID: DefaultClientID, UserID: req.GetSubject(), Scopes: req.GetScopes()}
	}
	return s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
}

type lateHandler struct{ http.Handler }

// startIdP serves the provider; its issuer is the returned URL. The one
// user is dave (password pw, group finance-emea); his ID equals his
// username because the example's device page names the subject by
// username.
func startIdP(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	users := idpUsers{"dave": {ID: "dave", Username: "dave", Password: "pw", Email: "dave@acme.test", EmailVerified: true}}
	clients := map[string]*storage.Client{DefaultClientID: storage.NativeClient(DefaultClientID, "http://127.0.0.1/callback")}
	st := &idpStorage{Storage: storage.NewStorageWithClients(users, clients), key: &idpKey{id: "rsa-1", priv: k},
		groups: map[string][]string{"dave": {"finance-emea"}}}
	var h lateHandler // the issuer (the server's URL) is needed to build the handler
	srv := httptest.NewServer(&h)
	t.Cleanup(srv.Close)
	h.Handler = exampleop.SetupServer(srv.URL, st, nil, false)
	return srv.URL
}
