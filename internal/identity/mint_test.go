package identity

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func wantMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Fatalf("%s: mode %v, want %v", path, got, want)
	}
}

// verifyTokenFile reads a token file and verifies it with v.
func verifyTokenFile(t *testing.T, v *Verifier, path string) Principal {
	t.Helper()
	tok, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(t.Context(), string(tok))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

func devVerifier(t *testing.T, b DevBundle) *Verifier {
	t.Helper()
	return newVerifier(t, map[string]ed25519.PublicKey{b.KeyID: b.PublicKey})
}

func TestMintDev(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	b, err := MintDev(dir, []string{"alice", "bob@example.com"}, testIssuer, testAudience, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Reused {
		t.Error("fresh directory reported a reused key")
	}
	if b.KeyID != DevKeyID || b.KeyPath != filepath.Join(dir, "signing.key") || b.PublicKeyPath != filepath.Join(dir, "signing.pub") {
		t.Fatalf("bundle %+v", b)
	}
	wantMode(t, dir, 0o700)
	wantMode(t, filepath.Join(dir, "tokens"), 0o700)
	wantMode(t, b.KeyPath, 0o600)
	pub, err := LoadPublicKeyPEM(b.PublicKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(b.PublicKey) {
		t.Fatal("signing.pub differs from the bundle's public key")
	}
	priv, err := loadPrivateKeyPEM(b.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !priv.Public().(ed25519.PublicKey).Equal(b.PublicKey) {
		t.Fatal("signing.key does not match the public key")
	}

	v := devVerifier(t, b)
	for _, u := range []string{"alice", "bob@example.com"} {
		path := b.TokenPaths[u]
		if path != filepath.Join(dir, "tokens", u+".jwt") {
			t.Fatalf("token path for %s = %q", u, path)
		}
		wantMode(t, path, 0o600)
		if p := verifyTokenFile(t, v, path); !reflect.DeepEqual(p, Principal{Subject: u, Kind: KindPerson, Issuer: testIssuer}) {
			t.Fatalf("%s: principal %+v", u, p)
		}
	}
	if len(b.TokenPaths) != 2 {
		t.Fatalf("TokenPaths = %v", b.TokenPaths)
	}
	// The tokens expire after ttl.
	late, _ := NewVerifier(Config{Issuer: testIssuer, Audience: testAudience,
		Keys: map[string]ed25519.PublicKey{DevKeyID: b.PublicKey}, Now: func() time.Time { return t0.Add(2 * time.Hour) }})
	tok, _ := os.ReadFile(b.TokenPaths["alice"])
	if _, err := late.Verify(t.Context(), string(tok)); err == nil || err.Error() != "unauthenticated: token expired" {
		t.Fatalf("token after ttl: %v", err)
	}

	// A second run reuses the key: old tokens still verify, new ones too.
	keyBefore, _ := os.ReadFile(b.KeyPath)
	b2, err := MintDev(dir, []string{"carol"}, testIssuer, testAudience, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !b2.Reused || !b2.PublicKey.Equal(b.PublicKey) {
		t.Fatalf("second run: reused=%v, same key=%v", b2.Reused, b2.PublicKey.Equal(b.PublicKey))
	}
	if keyAfter, _ := os.ReadFile(b.KeyPath); !bytes.Equal(keyBefore, keyAfter) {
		t.Fatal("signing.key rewritten on reuse")
	}
	wantMode(t, b.KeyPath, 0o600)
	verifyTokenFile(t, v, b.TokenPaths["alice"])
	if p := verifyTokenFile(t, v, b2.TokenPaths["carol"]); p.Subject != "carol" {
		t.Fatalf("carol: %+v", p)
	}
	// No temp files are left behind.
	for _, d := range []string{dir, filepath.Join(dir, "tokens")} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name()[0] == '.' {
				t.Errorf("leftover temp file %s", filepath.Join(d, e.Name()))
			}
		}
	}
}

// A signing.pub that was deleted or damaged is rewritten from the key.
func TestMintDevRewritesPublicKey(t *testing.T) {
	dir := t.TempDir()
	b, err := MintDev(dir, nil, testIssuer, testAudience, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.PublicKeyPath, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MintDev(dir, nil, testIssuer, testAudience, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKeyPEM(b.PublicKeyPath)
	if err != nil || !pub.Equal(b.PublicKey) {
		t.Fatalf("signing.pub after rerun: %v", err)
	}
}

// Concurrent first runs agree on one key.
func TestMintDevConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	bundles := make([]DevBundle, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			bundles[i], errs[i] = MintDev(dir, []string{"alice"}, testIssuer, testAudience, time.Hour, t0)
		})
	}
	wg.Wait()
	onDisk, err := LoadPublicKeyPEM(filepath.Join(dir, "signing.pub"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if !bundles[i].PublicKey.Equal(onDisk) {
			t.Fatalf("run %d used a different key", i)
		}
	}
	verifyTokenFile(t, devVerifier(t, bundles[0]), bundles[0].TokenPaths["alice"])
}

func TestMintDevRefusesLooseKey(t *testing.T) {
	dir := t.TempDir()
	b, err := MintDev(dir, nil, testIssuer, testAudience, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(b.KeyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MintDev(dir, []string{"alice"}, testIssuer, testAudience, time.Hour, t0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MintDev with a 0644 key = %v, want ErrInvalidConfig", err)
	}
}

func TestMintDevRefusesBadKeyFile(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "signing.key")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := MintDev(dir, []string{"alice"}, testIssuer, testAudience, time.Hour, t0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MintDev with a junk key = %v, want ErrInvalidConfig", err)
	}
	if data, _ := os.ReadFile(key); string(data) != "not a key" {
		t.Fatal("MintDev replaced an unreadable key file")
	}
}

func TestMintDevArgs(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]func() error{
		"no dir": func() error {
			_, err := MintDev("", []string{"a"}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
		"no issuer":   func() error { _, err := MintDev(dir, []string{"a"}, "", testAudience, time.Hour, t0); return err },
		"no audience": func() error { _, err := MintDev(dir, []string{"a"}, testIssuer, "", time.Hour, t0); return err },
		"zero ttl":    func() error { _, err := MintDev(dir, []string{"a"}, testIssuer, testAudience, 0, t0); return err },
		"duplicate": func() error {
			_, err := MintDev(dir, []string{"a", "a"}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
		"empty user": func() error {
			_, err := MintDev(dir, []string{""}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
		"path user": func() error {
			_, err := MintDev(dir, []string{"../evil"}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
		"slash user": func() error {
			_, err := MintDev(dir, []string{"a/b"}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
		"dot user": func() error {
			_, err := MintDev(dir, []string{".hidden"}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
		"space user": func() error {
			_, err := MintDev(dir, []string{"a b"}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
		"too long user": func() error {
			_, err := MintDev(dir, []string{strings.Repeat("a", 65)}, testIssuer, testAudience, time.Hour, t0)
			return err
		},
	}
	for name, run := range cases {
		if err := run(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: MintDev = %v, want ErrInvalidConfig", name, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad arguments left files behind: %v", entries)
	}
}

func TestLoadPublicKeyPEM(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadPublicKeyPEM(filepath.Join(dir, "missing.pub")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	b, err := MintDev(dir, nil, testIssuer, testAudience, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	// A private key file is not a public key.
	if _, err := LoadPublicKeyPEM(b.KeyPath); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("private key as public key: %v", err)
	}
	junk := filepath.Join(dir, "junk.pub")
	if err := os.WriteFile(junk, []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPublicKeyPEM(junk); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("junk public key: %v", err)
	}
}
