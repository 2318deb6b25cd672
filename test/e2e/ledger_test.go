package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// grantFiles signs a grant for the artifact payload of one file and writes
// the grant, the public key and the artifact into dir.
func grantFiles(t *testing.T, dir, run string) (grantPath, keyPath, artifact string) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	artifact = filepath.Join(dir, "commit.diff")
	content := []byte("diff --git a/x b/x\n")
	writeTestFile(t, artifact, content)
	d, err := freshness.PayloadDigest(grant.ArtifactsPayload(map[string]string{"commit.diff": freshness.ContentDigest(content)}))
	if err != nil {
		t.Fatal(err)
	}
	g := &grant.Grant{RunID: run, StepID: "commit", Action: "gate.commit", AskID: "commit", PayloadDigest: d, ExpiresAt: time.Now().Add(10 * time.Minute)}
	grant.Sign(g, "grant", priv)
	b, err := protojson.Marshal(wire.Grant(g))
	if err != nil {
		t.Fatal(err)
	}
	grantPath = filepath.Join(dir, "grant.json")
	writeTestFile(t, grantPath, b)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyPath = filepath.Join(dir, "grant.pub")
	writeTestFile(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return grantPath, keyPath, artifact
}

func writeTestFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// verifyAt runs `approvectl grant verify` as a service on a host of its
// own would: its own working directory and TOLLGATE_HOME.
func verifyAt(t *testing.T, host, grantPath, keyPath, artifact, ledger string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "approvectl"), "grant", "verify", "--grant", grantPath, "--key", keyPath,
		"--action", "gate.commit", "--artifact", artifact, "--ledger", ledger)
	cmd.Dir = host
	cmd.Env = append(os.Environ(), "TOLLGATE_HOME="+filepath.Join(host, ".tollgate"), "TOLLGATE_TOKEN=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Error(err)
	}
	return result{out.String(), errb.String(), code}
}

// Item 17 (issue 13): two services on different hosts that share a Redis
// ledger (`--ledger redis://…`) accept a grant once: the second
// approvectl process refuses the replay. Each host's own ledger file would
// not (a ledger is the verifier's memory, see `grant verify --help`).
func TestItem17_ReplayAcrossTwoVerifiersSharingARedisLedger(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	dir := t.TempDir()
	grantPath, keyPath, artifact := grantFiles(t, dir, "r_ledger1")
	hostA, hostB := t.TempDir(), t.TempDir()
	if res := verifyAt(t, hostA, grantPath, keyPath, artifact, r.URL()); res.code != 0 {
		t.Fatalf("host A, first use: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res := verifyAt(t, hostB, grantPath, keyPath, artifact, r.URL())
	if res.code != 1 || !strings.Contains(res.stderr, "already used") {
		t.Fatalf("host B replays the grant against the shared ledger: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := verifyAt(t, hostB, grantPath, keyPath, artifact, "redis://127.0.0.1:1/0"); res.code != 1 || !strings.Contains(res.stderr, "ledger") {
		t.Fatalf("an unreachable ledger refuses: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// The documented limit: a ledger of its own does not know of uses
	// elsewhere.
	if res := verifyAt(t, hostB, grantPath, keyPath, artifact, filepath.Join(hostB, "ledger.json")); res.code != 0 {
		t.Fatalf("a separate file ledger: exit %d\n%s", res.code, res.stderr)
	}
}

// Item 17: eight approvectl processes racing on one grant with one Redis
// ledger: exactly one accepts.
func TestItem17_RacingVerifierProcessesAcceptOnce(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	dir := t.TempDir()
	grantPath, keyPath, artifact := grantFiles(t, dir, "r_ledger2")
	const n = 8
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		host := t.TempDir()
		wg.Go(func() { results[i] = verifyAt(t, host, grantPath, keyPath, artifact, r.URL()) })
	}
	wg.Wait()
	accepted := 0
	for _, res := range results {
		switch {
		case res.code == 0:
			accepted++
		case res.code == 1 && strings.Contains(res.stderr, "already used"):
		default:
			t.Errorf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d of %d processes accepted the grant, want 1", accepted, n)
	}
}
