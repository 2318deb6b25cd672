package identity

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// DefaultRecheck is how often a KeyPair looks at its files again. A
// Kubernetes Secret's update reaches a mounted volume within about a
// minute (the kubelet's sync period), so ten seconds adds little to that.
const DefaultRecheck = 10 * time.Second

// KeyPair serves a certificate and its key from two files and reads them
// again when they change, so a rotated certificate (cert-manager renewing
// a Secret, an operator replacing the files) is served without a restart.
// A new pair that does not load — a half-written file, a key that does not
// match — leaves the pair in use in place and is reported to Failed once
// per distinct content; the next good pair is taken up as soon as it is seen.
type KeyPair struct {
	certFile, keyFile string
	recheck           time.Duration
	failed            func(error)
	now               func() time.Time

	mu        sync.Mutex
	cur       *tls.Certificate
	certPEM   []byte // what cur was loaded from
	keyPEM    []byte
	badCert   []byte // the last pair that failed, not reported twice
	badKey    []byte
	checkedAt time.Time
}

// KeyPairConfig configures NewKeyPair.
type KeyPairConfig struct {
	CertFile, KeyFile string
	// Recheck is the least time between two reads of the files (0:
	// DefaultRecheck; negative: on every handshake, for tests).
	Recheck time.Duration
	// Failed, if set, hears of a changed pair that does not load.
	Failed func(error)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// NewKeyPair loads the pair; one that does not load now is an error.
func NewKeyPair(c KeyPairConfig) (*KeyPair, error) {
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, fmt.Errorf("%w: tls needs a certificate and its key", ErrInvalidConfig)
	}
	if c.Recheck == 0 {
		c.Recheck = DefaultRecheck
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Failed == nil {
		c.Failed = func(error) {}
	}
	k := &KeyPair{certFile: c.CertFile, keyFile: c.KeyFile, recheck: c.Recheck, failed: c.Failed, now: c.Now}
	certPEM, keyPEM, cert, err := k.read()
	if err != nil {
		return nil, err
	}
	k.cur, k.certPEM, k.keyPEM, k.checkedAt = cert, certPEM, keyPEM, k.now()
	return k, nil
}

func (k *KeyPair) read() (certPEM, keyPEM []byte, cert *tls.Certificate, err error) {
	if certPEM, err = os.ReadFile(k.certFile); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: read certificate: %v", ErrInvalidConfig, err)
	}
	if keyPEM, err = os.ReadFile(k.keyFile); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: read key: %v", ErrInvalidConfig, err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return certPEM, keyPEM, nil, fmt.Errorf("%w: load certificate %s with key %s: %v", ErrInvalidConfig, k.certFile, k.keyFile, err)
	}
	return certPEM, keyPEM, &c, nil
}

// Certificate is the pair to serve now, read again first when Recheck has
// passed since the last look. It never fails once NewKeyPair has
// succeeded: it is tls.Config's GetCertificate (and GetClientCertificate).
func (k *KeyPair) Certificate() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := k.now(); k.recheck < 0 || now.Sub(k.checkedAt) >= k.recheck {
		k.checkedAt = now
		k.refresh()
	}
	return k.cur
}

func (k *KeyPair) refresh() {
	certPEM, keyPEM, cert, err := k.read()
	if certPEM == nil || keyPEM == nil {
		// A file gone for a moment (a volume's symlinks being swapped):
		// keep serving, look again next time.
		return
	}
	if bytes.Equal(certPEM, k.certPEM) && bytes.Equal(keyPEM, k.keyPEM) {
		return
	}
	if err != nil {
		if !bytes.Equal(certPEM, k.badCert) || !bytes.Equal(keyPEM, k.badKey) {
			k.badCert, k.badKey = certPEM, keyPEM
			k.failed(fmt.Errorf("%w (still serving the certificate loaded before)", err))
		}
		return
	}
	k.cur, k.certPEM, k.keyPEM, k.badCert, k.badKey = cert, certPEM, keyPEM, nil, nil
}

// GetCertificate is Certificate as tls.Config.GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}
