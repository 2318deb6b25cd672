package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// MinKeyBytes is the shortest web key accepted (--web-key): it seals
// sessions and signs links and CSRF tokens, so every replica behind one
// address must share it.
const MinKeyBytes = 32

// maxSealed bounds what open reads: a cookie or link longer than this is
// refused before any decryption.
const maxSealed = 4 << 10

// keys are the web surface's keys, each derived from the one web key for
// one purpose (HKDF-SHA256), so a value sealed or signed for one purpose
// is never accepted for another.
type keys struct {
	session cipher.AEAD // session and sign-in cookies (sealed: the person cannot read or change them)
	link    []byte      // single-use links (signed: the link is readable, not forgeable)
	csrf    []byte      // CSRF tokens, bound to one session
}

func newKeys(secret []byte) (keys, error) {
	if len(secret) < MinKeyBytes {
		return keys{}, fmt.Errorf("the web key is %d bytes; at least %d are needed", len(secret), MinKeyBytes)
	}
	derive := func(label string) ([]byte, error) {
		return hkdf.Key(sha256.New, secret, nil, "tollgate web "+label, 32)
	}
	sk, err := derive("session")
	if err != nil {
		return keys{}, err
	}
	block, err := aes.NewCipher(sk)
	if err != nil {
		return keys{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return keys{}, err
	}
	lk, err := derive("link")
	if err != nil {
		return keys{}, err
	}
	ck, err := derive("csrf")
	if err != nil {
		return keys{}, err
	}
	return keys{session: aead, link: lk, csrf: ck}, nil
}

// errSealed is every reason a sealed or signed value is not accepted; the
// reason itself is never shown (it would help a forger).
var errSealed = errors.New("not a valid value")

// seal encrypts and authenticates v as JSON for purpose (bound as
// additional data), in URL-safe base64.
func (k keys) seal(purpose string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, k.session.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := k.session.Seal(nonce, nonce, plain, []byte(purpose))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// open reverses seal for the same purpose.
func (k keys) open(purpose, s string, v any) error {
	if len(s) > maxSealed {
		return errSealed
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < k.session.NonceSize() {
		return errSealed
	}
	n := k.session.NonceSize()
	plain, err := k.session.Open(nil, raw[:n], raw[n:], []byte(purpose))
	if err != nil {
		return errSealed
	}
	if json.Unmarshal(plain, v) != nil {
		return errSealed
	}
	return nil
}

// mac is HMAC-SHA256 of msg under key.
func mac(key []byte, msg ...string) []byte {
	h := hmac.New(sha256.New, key)
	for _, m := range msg {
		h.Write([]byte(m))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// randomID is 16 random bytes in URL-safe base64.
func randomID() string { return base64.RawURLEncoding.EncodeToString(randomBytes(16)) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return b
}

// unixTime is a time as seconds in sealed values.
func unixTime(t time.Time) int64 { return t.Unix() }
