package identity

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// mountLike lays out a pair the way the kubelet mounts a Secret: the
// files are symlinks through ..data to a timestamped directory, and an
// update swaps ..data atomically to a new directory.
type mountLike struct {
	t   *testing.T
	dir string
	n   int
}

func (m *mountLike) publish(certPEM, keyPEM []byte) {
	m.t.Helper()
	m.n++
	gen := filepath.Join(m.dir, "..gen"+string(rune('0'+m.n)))
	if err := os.Mkdir(gen, 0o755); err != nil {
		m.t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(gen, name), b, 0o600); err != nil {
			m.t.Fatal(err)
		}
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		link := filepath.Join(m.dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				m.t.Fatal(err)
			}
		}
	}
}

func mintPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	pki, err := MintDevPKI(t.TempDir(), DefaultTrustDomain, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(pki.Server.Cert)
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(pki.Server.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// TestKeyPairRotates: a pair swapped in the way a Secret update arrives is
// served once Recheck has passed, not before; a broken pair keeps the old
// one in service and is reported once; the next good pair is taken up.
func TestKeyPairRotates(t *testing.T) {
	m := &mountLike{t: t, dir: t.TempDir()}
	c1, k1 := mintPair(t)
	c2, k2 := mintPair(t)
	c3, k3 := mintPair(t)
	m.publish(c1, k1)
	now := time.Unix(1_000_000, 0)
	var failures []error
	kp, err := NewKeyPair(KeyPairConfig{CertFile: filepath.Join(m.dir, "tls.crt"), KeyFile: filepath.Join(m.dir, "tls.key"),
		Recheck: time.Minute, Now: func() time.Time { return now }, Failed: func(err error) { failures = append(failures, err) }})
	if err != nil {
		t.Fatal(err)
	}
	serving := func() []byte { return kp.Certificate().Certificate[0] }
	leaf := func(certPEM, keyPEM []byte) []byte {
		t.Helper()
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, "c"), certPEM, 0o600)
		os.WriteFile(filepath.Join(d, "k"), keyPEM, 0o600)
		p, err := NewKeyPair(KeyPairConfig{CertFile: filepath.Join(d, "c"), KeyFile: filepath.Join(d, "k")})
		if err != nil {
			t.Fatal(err)
		}
		return p.Certificate().Certificate[0]
	}
	first, second, third := leaf(c1, k1), leaf(c2, k2), leaf(c3, k3)
	if !bytes.Equal(serving(), first) {
		t.Fatal("not serving the pair it loaded")
	}

	m.publish(c2, k2)
	now = now.Add(30 * time.Second)
	if !bytes.Equal(serving(), first) {
		t.Fatal("read the files again before Recheck passed")
	}
	now = now.Add(31 * time.Second)
	if !bytes.Equal(serving(), second) {
		t.Fatal("a rotated pair is not served after Recheck")
	}

	// The certificate of one pair with the key of another: refused, the
	// second pair still served, reported once however often it is seen.
	m.publish(c3, k2)
	for range 3 {
		now = now.Add(time.Minute)
		if !bytes.Equal(serving(), second) {
			t.Fatal("a pair that does not load replaced the one in service")
		}
	}
	if len(failures) != 1 {
		t.Fatalf("a broken pair was reported %d times, want once: %v", len(failures), failures)
	}

	m.publish(c3, k3)
	now = now.Add(time.Minute)
	if !bytes.Equal(serving(), third) {
		t.Fatal("the good pair after a broken one is not taken up")
	}

	// Files gone (a volume being remounted): keep serving.
	os.Remove(filepath.Join(m.dir, "tls.crt"))
	now = now.Add(time.Minute)
	if !bytes.Equal(serving(), third) || len(failures) != 1 {
		t.Fatal("a missing file stopped the pair in service or was reported as a broken pair")
	}
}

func TestKeyPairMustLoadAtStart(t *testing.T) {
	c, _ := mintPair(t)
	_, k := mintPair(t)
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "c"), c, 0o600)
	os.WriteFile(filepath.Join(d, "k"), k, 0o600)
	if _, err := NewKeyPair(KeyPairConfig{CertFile: filepath.Join(d, "c"), KeyFile: filepath.Join(d, "k")}); err == nil {
		t.Fatal("a certificate with another pair's key loaded")
	}
	if _, err := NewKeyPair(KeyPairConfig{CertFile: filepath.Join(d, "missing"), KeyFile: filepath.Join(d, "k")}); err == nil {
		t.Fatal("a missing certificate loaded")
	}
}
