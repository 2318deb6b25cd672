package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/adminhttp"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// get GETs url once: the status code and body, or an error.
func get(url string) (int, string, error) {
	// No keep-alive: no client goroutine outlives the probe (goleak).
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitProbe polls url (every 10ms, for up to 10s) until it answers code
// with a body that has prefix, and returns the body.
func waitProbe(t *testing.T, url string, code int, prefix string) string {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	var last string
	for {
		c, body, err := get(url)
		if err == nil && c == code && strings.HasPrefix(body, prefix) {
			return body
		}
		last = fmt.Sprintf("%d %q %v", c, body, err)
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: want %d %q…, last answer %s", url, code, prefix, last)
		}
	}
}

// /readyz follows the executor's stream: 503 before any stream opened,
// 503 with the error when the control plane cannot be reached, 503 while
// the hello is not yet welcomed, 200 once it is, 503 with why once the
// stream ends, and 503 "draining" once the executor stops; /healthz is
// 200 throughout.
func TestReadyzFollowsTheStream(t *testing.T) {
	st := &Status{}
	adm, err := adminhttp.Start("127.0.0.1:0", AdminMux(st), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := adm.Close(); err != nil {
			t.Errorf("admin: %v", err)
		}
	}()
	base := "http://" + adm.Addr()
	// Each Connect takes what the test hands it: nil fails the attempt.
	streams := make(chan *fakeStream)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ID: "edge", Host: newBlockingHost(), Status: st, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				select {
				case fs := <-streams:
					if fs == nil {
						return nil, errors.New("control plane down")
					}
					sctx, cancel := context.WithCancel(ctx)
					context.AfterFunc(fs.ctx, cancel)
					fs.ctx = sctx
					return fs, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}})
	}()
	defer func() { stop(); <-done }()

	waitProbe(t, base+"/healthz", 200, "ok")
	waitProbe(t, base+"/readyz", 503, "not connected to a control plane: no stream opened yet")
	streams <- nil
	waitProbe(t, base+"/readyz", 503, "not connected to a control plane: connect: control plane down")

	streamCtx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	fs := &fakeStream{ctx: streamCtx, down: make(chan *tollgatev1.ControlMessage, 16), up: make(chan *tollgatev1.ExecutorMessage, 16)}
	streams <- fs
	if (<-fs.up).GetHello() == nil {
		t.Fatal("hello first")
	}
	if c, body, err := get(base + "/readyz"); err != nil || c != 503 {
		t.Fatalf("ready before the hello was welcomed: %d %q %v", c, body, err)
	}
	fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Welcome{Welcome: &tollgatev1.Welcome{HeartbeatInterval: durationpb.New(time.Hour)}}}
	waitProbe(t, base+"/readyz", 200, "ok")

	hangUp()
	waitProbe(t, base+"/readyz", 503, "not connected to a control plane: EOF")
	stop()
	waitProbe(t, base+"/readyz", 503, "draining")
	waitProbe(t, base+"/healthz", 200, "ok")
}

// syncBuffer is an io.Writer the test reads while Main writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// The binary's path with no control plane to reach: the admin listener
// from the config (admin_listen) serves /healthz 200 and /readyz 503 with
// the connect error; --admin-listen wins over the config; the listener
// is gone once Main returns.
func TestMainServesProbesWithNoControlPlane(t *testing.T) {
	dir := t.TempDir()
	pki, err := identity.MintDevPKI(filepath.Join(dir, "pki"), "tollgate", []string{"edge-1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	write := func(adminListen, drainTimeout string) string {
		p := filepath.Join(dir, "executor.yaml")
		cfg := fmt.Sprintf("id: edge-1\ncontrol_plane: %s\ntls: {cert: %s, key: %s, ca: %s}\nadmin_listen: %q\ndrain_timeout: %s\n",
			freeAddr(t), pki.Executors["edge-1"].Cert, pki.Executors["edge-1"].Key, pki.CA, adminListen, drainTimeout)
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	addrRE := regexp.MustCompile(`msg="admin listener" addr=(\S+)`)
	run := func(args ...string) {
		t.Helper()
		var stderr syncBuffer
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Main(ctx, args, Options{Stdout: io.Discard, Stderr: &stderr}) }()
		var base string
		tick := time.NewTicker(10 * time.Millisecond)
		for deadline := time.After(10 * time.Second); base == ""; {
			if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
				base = "http://" + m[1]
				break
			}
			select {
			case <-tick.C:
			case err := <-done:
				t.Fatalf("Main returned before serving probes: %v\n%s", err, stderr.String())
			case <-deadline:
				stop()
				t.Fatalf("no admin listener logged:\n%s", stderr.String())
			}
		}
		tick.Stop()
		waitProbe(t, base+"/healthz", 200, "ok")
		waitProbe(t, base+"/readyz", 503, "not connected to a control plane: connect: ")
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Main: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Main did not return after its context ended")
		}
		if _, _, err := get(base + "/healthz"); err == nil {
			t.Fatal("the admin listener still serves after Main returned")
		}
	}
	run("--config", write("127.0.0.1:0", "2s"))
	// The config's address is unusable: the flag's is used.
	run("--config", write("256.0.0.1:1", "2s"), "--admin-listen", "127.0.0.1:0")
	// And without the flag, the config's is: Main says so.
	err = Main(context.Background(), []string{"--config", write("256.0.0.1:1", "2s")}, Options{Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "admin listen 256.0.0.1:1") {
		t.Fatalf("want the config's admin_listen refused, got %v", err)
	}
	// The same for drain_timeout and --drain-timeout (a context already
	// ended: Main stops as soon as it started).
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	err = Main(ended, []string{"--config", write("", "-1s")}, Options{Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("want the config's negative drain_timeout refused, got %v", err)
	}
	if err := Main(ended, []string{"--config", write("", "-1s"), "--drain-timeout", "1s"}, Options{Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		t.Fatalf("--drain-timeout 1s over the config's -1s: %v", err)
	}
}

// drain_timeout reads as a duration; absent, it is unset (the flag's
// default applies).
func TestDrainTimeoutConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.yaml")
	for body, want := range map[string]string{"drain_timeout: 7s\n": "7s", "drain_timeout: 0s\n": "0s", "id: x\n": "unset"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		fc, err := LoadConfig(p, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		got := "unset"
		if fc.DrainTimeout != nil {
			got = fc.DrainTimeout.String()
		}
		if got != want {
			t.Errorf("%q: drain timeout %s, want %s", body, got, want)
		}
	}
}
