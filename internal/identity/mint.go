package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DevKeyID is the key id ("kid") of the tokens [MintDev] signs.
const DevKeyID = "dev"

// Names of the files [MintDev] keeps in its directory.
const (
	devKeyFile    = "signing.key"
	devPubFile    = "signing.pub"
	devTokensDir  = "tokens"
	devTokenExt   = ".jwt"
	maxDevUserLen = 64
)

// Mint signs a token for subject with priv (alg "EdDSA"): "iss" issuer, "aud"
// [audience], "sub" subject, "iat" and "nbf" now, "exp" now+ttl, and a "kid"
// header when kid is not empty. The token names no "kind", so it verifies as
// a [KindPerson]. It is for dev mode and tests; errors wrap
// [ErrInvalidConfig].
func Mint(priv ed25519.PrivateKey, kid, issuer, audience, subject string, ttl time.Duration, now time.Time) (string, error) {
	switch {
	case len(priv) != ed25519.PrivateKeySize:
		return "", fmt.Errorf("%w: not an Ed25519 private key", ErrInvalidConfig)
	case issuer == "" || audience == "" || subject == "":
		return "", fmt.Errorf("%w: issuer, audience and subject are required", ErrInvalidConfig)
	case ttl <= 0:
		return "", fmt.Errorf("%w: ttl must be positive", ErrInvalidConfig)
	}
	claims := tokenClaims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer:    issuer,
		Subject:   subject,
		Audience:  jwt.ClaimStrings{audience},
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	if kid != "" {
		t.Header["kid"] = kid
	}
	s, err := t.SignedString(priv)
	if err != nil {
		return "", fmt.Errorf("%w: sign token: %v", ErrInvalidConfig, err)
	}
	return s, nil
}

// DevBundle is what [MintDev] made: the public key and key id a [Verifier]
// needs (Keys: {KeyID: PublicKey}), where the key files are, and the path of
// each user's token file (TokenPaths[user]). Reused is true when an existing
// signing key was used rather than a new one generated.
type DevBundle struct {
	PublicKey     ed25519.PublicKey
	KeyID         string
	KeyPath       string
	PublicKeyPath string
	TokenPaths    map[string]string
	Reused        bool
}

// MintDev prepares dev-mode credentials in dir (created 0700 if missing). It
// reuses the Ed25519 key in dir/signing.key (PEM PKCS#8) when the file
// exists, refusing it if group or others may access it, and otherwise
// generates one and writes it there with mode 0600. It (re)writes the public
// key to dir/signing.pub (PEM PKIX, 0644) and, for each user, a token file
// dir/tokens/<user>.jwt (0600) holding a token from [Mint] with kid
// [DevKeyID], subject user, and the given issuer, audience, ttl and now.
// Users must be distinct names of at most 64 letters, digits, '.', '_', '-'
// or '@', not starting with '.'. Files are replaced atomically. Errors wrap
// [ErrInvalidConfig] for bad arguments or key files.
func MintDev(dir string, users []string, issuer, audience string, ttl time.Duration, now time.Time) (DevBundle, error) {
	if dir == "" {
		return DevBundle{}, fmt.Errorf("%w: dev directory is required", ErrInvalidConfig)
	}
	if issuer == "" || audience == "" {
		return DevBundle{}, fmt.Errorf("%w: issuer and audience are required", ErrInvalidConfig)
	}
	if ttl <= 0 {
		return DevBundle{}, fmt.Errorf("%w: ttl must be positive", ErrInvalidConfig)
	}
	seen := make(map[string]bool, len(users))
	for _, u := range users {
		if !validDevUser(u) {
			return DevBundle{}, fmt.Errorf("%w: bad dev user name %q", ErrInvalidConfig, u)
		}
		if seen[u] {
			return DevBundle{}, fmt.Errorf("%w: dev user %q listed twice", ErrInvalidConfig, u)
		}
		seen[u] = true
	}
	tokensDir := filepath.Join(dir, devTokensDir)
	if err := os.MkdirAll(tokensDir, 0o700); err != nil {
		return DevBundle{}, err
	}
	keyPath := filepath.Join(dir, devKeyFile)
	priv, reused, err := loadOrCreateKey(keyPath)
	if err != nil {
		return DevBundle{}, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return DevBundle{}, err
	}
	pubPath := filepath.Join(dir, devPubFile)
	if err := writeFileAtomic(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return DevBundle{}, err
	}
	b := DevBundle{
		PublicKey:     pub,
		KeyID:         DevKeyID,
		KeyPath:       keyPath,
		PublicKeyPath: pubPath,
		TokenPaths:    make(map[string]string, len(users)),
		Reused:        reused,
	}
	for _, u := range users {
		tok, err := Mint(priv, DevKeyID, issuer, audience, u, ttl, now)
		if err != nil {
			return DevBundle{}, err
		}
		p := filepath.Join(tokensDir, u+devTokenExt)
		if err := writeFileAtomic(p, []byte(tok), 0o600); err != nil {
			return DevBundle{}, err
		}
		b.TokenPaths[u] = p
	}
	return b, nil
}

// validDevUser reports whether u is usable both as a subject and as a file
// name.
func validDevUser(u string) bool {
	if u == "" || len(u) > maxDevUserLen || u[0] == '.' {
		return false
	}
	for _, r := range u {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '.', r == '_', r == '-', r == '@':
		default:
			return false
		}
	}
	return true
}

// loadOrCreateKey returns the private key at path, generating and writing it
// (0600) when there is no file there. reused reports that the file existed.
func loadOrCreateKey(path string) (priv ed25519.PrivateKey, reused bool, err error) {
	priv, err = loadPrivateKeyPEM(path)
	if err == nil {
		return priv, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	_, priv, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	// Write a complete temp file, then link it into place: the link fails if
	// another MintDev created the key meanwhile, and then that key wins.
	tmp, err := writeTemp(path, data, 0o600)
	if err != nil {
		return nil, false, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			priv, err = loadPrivateKeyPEM(path)
			return priv, err == nil, err
		}
		return nil, false, err
	}
	return priv, false, nil
}

// loadPrivateKeyPEM reads an Ed25519 private key (PEM PKCS#8) that only its
// owner may access. A missing file yields an error wrapping fs.ErrNotExist.
func loadPrivateKeyPEM(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalidConfig, path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is accessible by group or others (mode %v); chmod 600 it", ErrInvalidConfig, path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: %s holds no PEM PRIVATE KEY", ErrInvalidConfig, path)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, path, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an Ed25519 key", ErrInvalidConfig, path)
	}
	return priv, nil
}

// LoadPublicKeyPEM reads an Ed25519 public key from a PEM "PUBLIC KEY"
// (PKIX) file, such as the signing.pub [MintDev] writes. Errors for content
// that is not such a key wrap [ErrInvalidConfig].
func LoadPublicKeyPEM(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%w: %s holds no PEM PUBLIC KEY", ErrInvalidConfig, path)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, path, err)
	}
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an Ed25519 key", ErrInvalidConfig, path)
	}
	return pub, nil
}

// writeTemp writes data with perm to a new temp file next to path and
// returns its name.
func writeTemp(path string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// writeFileAtomic replaces path with data (mode perm) in one rename.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
