package charttest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"

	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/oidctest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// TestRenderedControlPlaneRuns: the chart's rendered control plane and
// executor, run as processes here with the same args and environment,
// their mounted ConfigMaps and Secrets laid out under a temp dir, start
// against a real redis-server (durable, with a password), answer every
// probe the chart gives them, pass a run with a fan, a gate and an
// approved side effect, leave the audit clean, and on SIGTERM turn
// NOT_SERVING and exit within their grace periods. The web inbox is on
// (sign-in at a real OpenID provider here): its listener answers, over
// the API's TLS, every path the served table gives it. The MCP gateway is
// on (mcp.pending, an agent with an owner): an agent calls the executor's
// tools through it over the API's TLS (mcpAnswers).
//
// What is changed from the rendering, and only that: listen addresses
// (a free loopback port for each), the Redis URL (the test's server), the
// OpenID issuer (the test's provider), and every mounted path (under the
// temp dir). The Secrets are external, so the test makes them: keys,
// certificates, a password.
func TestRenderedControlPlaneRuns(t *testing.T) {
	policy, err := filepath.Abs("../../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	skill, err := filepath.Abs("../../../examples/skills/graph-ask-demo/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderRaw(t, filepath.Join(chartDir, "ci", "default-values.yaml"),
		`executor.mcpServers[0].name=mcp-monitor`,
		`executor.mcpServers[0].command={executor,mcp-server,monitor}`,
		`executor.mcpServers[1].name=notes`,
		`executor.mcpServers[1].command={executor,mcp-server,notes,--file,/var/lib/tollgate/notes.jsonl}`,
		"web.enabled=true", "web.url=https://inbox.example.com", "web.key.existingSecret=tollgate-web",
		"oidc.issuer=https://idp.example.com", "oidc.clientID="+oidctest.ClientID,
		"mcp.enabled=true", "mcp.pending=true", "agentOwners={alice-agent=alice}",
		"file:policy.csv="+policy,
		// Production serves only the skills it is given: this one from
		// the chart's skills ConfigMap, through --skills-dir.
		"file:skills.files.graph-ask-demo="+skill)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	bins := buildBinaries(t)
	srv := redistest.Start(t)
	const redisPassword = "smoke-test-password"
	if _, err := srv.Do("CONFIG", "SET", "requirepass", redisPassword); err != nil {
		t.Fatal(err)
	}
	sec := makeSecrets(t, redisPassword)
	idp := oidctest.Start(t)

	cpPod := m.podWith("controlplane")
	cp := start(t, m, cpPod, "controlplane", bins, sec, "", func(flag, v string) string {
		switch flag {
		case "--redis":
			return srv.URL()
		case "--oidc-issuer":
			return idp.Issuer
		}
		return v
	})
	cp.waitProbes(t)
	if cp.addrs["--web-listen"] == "" {
		t.Fatal("web.enabled rendered no --web-listen")
	}
	if cp.addrs["--mcp-listen"] == "" {
		t.Fatal("mcp.enabled rendered no --mcp-listen")
	}
	cp.askServed(t, sec.caFile)

	exPod := m.podWith("executor")
	// The config's control_plane (the executor Service) is this control
	// plane's executor listener here.
	ex := start(t, m, exPod, "executor", bins, sec, cp.addrs["--executor-listen"], nil)
	ex.waitProbes(t)

	ctl := func(user string, args ...string) (string, int) {
		t.Helper()
		tok, err := identity.Mint(sec.jwtKey, "ci", "tollgate", "tollgate", user, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(bins, "approvectl"), append([]string{"--server", cp.addrs["--listen"], "--ca", sec.caFile, "-o", "json"}, args...)...)
		cmd.Env = []string{"TOLLGATE_TOKEN=" + tok, "HOME=" + t.TempDir(), "PATH=" + bins}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != 0 && code != 8 {
			t.Logf("approvectl %v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
		return stdout.String(), code
	}
	var run struct {
		RunID string `json:"run_id"`
		State string `json:"state"`
		Asks  []struct {
			AskID string `json:"ask_id"`
			State string `json:"state"`
		} `json:"asks"`
	}
	parse := func(s string) {
		t.Helper()
		if err := json.Unmarshal([]byte(s), &run); err != nil {
			t.Fatalf("approvectl -o json: %v\n%s", err, s)
		}
	}
	outJSON, code := ctl("alice", "run", "graph-ask-demo", "--request-id", "smoke-1", "--wait")
	if code != 8 {
		t.Fatalf("run --wait: exit %d, want 8 (parked on its gate)\n%s\ncontrol plane:\n%s\nexecutor:\n%s", code, outJSON, cp.log.String(), ex.log.String())
	}
	parse(outJSON)
	if len(run.Asks) != 1 {
		t.Fatalf("want one ask, have %+v", run.Asks)
	}
	if _, code := ctl("alice", "approve", run.Asks[0].AskID); code != 0 {
		t.Fatalf("approve: exit %d", code)
	}
	outJSON, code = ctl("alice", "run", "graph-ask-demo", "--request-id", "smoke-1", "--wait")
	parse(outJSON)
	if code != 0 || run.State != "complete" {
		t.Fatalf("after the approval: exit %d, state %s\n%s\nexecutor:\n%s", code, run.State, outJSON, ex.log.String())
	}
	notes, err := os.ReadFile(filepath.Join(ex.root, "var/lib/tollgate/notes.jsonl"))
	if err != nil || bytes.Count(notes, []byte("\n")) != 1 {
		t.Fatalf("the approved side effect did not run exactly once on the executor: %q %v", notes, err)
	}
	if out, code := ctl("audrey", "audit"); code != 0 {
		t.Fatalf("audit: exit %d\n%s", code, out)
	}
	agentToken, err := identity.Mint(sec.jwtKey, "ci", "tollgate", "tollgate", "alice-agent", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mcpAnswers(t, cp, sec.caFile, agentToken)

	// SIGTERM, as the kubelet sends it: each turns NOT_SERVING and exits
	// 0 within the grace period the chart gives it.
	ex.terminate(t, exPod.spec.TerminationGracePeriodSeconds)
	cp.terminate(t, cpPod.spec.TerminationGracePeriodSeconds)
}

// TestRenderedDevControlPlaneRuns: dev: true renders one control plane
// that starts here from its rendered args, answers its probes on the admin
// port while its API stays on loopback, runs the example skill with its
// own executor up to the gate, and stops within its grace period.
func TestRenderedDevControlPlaneRuns(t *testing.T) {
	m := render(t, filepath.Join(chartDir, "ci", "dev-values.yaml"))
	p := m.podWith("controlplane")
	if len(m.pods()) != 1 || p.replicas != 1 {
		t.Fatalf("dev mode renders %d pods, the control plane with %d replicas; want one pod, one replica", len(m.pods()), p.replicas)
	}
	bins := buildBinaries(t)
	cp := start(t, m, p, "controlplane", bins, secrets{}, "", nil)
	cp.waitProbes(t)
	cp.askServed(t, "")
	if !strings.HasPrefix(cp.addrs["--listen"], "127.0.0.1:") {
		t.Fatalf("dev mode's API is not on loopback: %s", cp.addrs["--listen"])
	}
	cmd := exec.Command(filepath.Join(bins, "approvectl"), "--server", cp.addrs["--listen"], "--as", "alice", "run", "graph-ask-demo", "--wait")
	cmd.Env = []string{"TOLLGATE_HOME=" + filepath.Join(cp.root, "var/lib/tollgate"), "PATH=" + bins}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 8 {
		t.Fatalf("approvectl --as alice run graph-ask-demo --wait in the pod: %v, want exit 8 (parked)\n%s\n%s", err, out, cp.log.String())
	}
	cp.terminate(t, p.spec.TerminationGracePeriodSeconds)
}

// buildBinaries builds the three binaries as the image has them (static).
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/controlplane", "./cmd/executor", "./cmd/approvectl")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// secrets are the external Secrets, made for the test.
type secrets struct {
	byName map[string]map[string][]byte // Secret name → key → content
	jwtKey ed25519.PrivateKey
	caFile string
}

func makeSecrets(t *testing.T, redisPassword string) secrets {
	t.Helper()
	dir := t.TempDir()
	pki, err := identity.MintDevPKI(filepath.Join(dir, "pki"), "tollgate", []string{"pool"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pubPEM := func(k ed25519.PublicKey) []byte {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	gpub, gpriv, _ := ed25519.GenerateKey(nil)
	gder, err := x509.MarshalPKCS8PrivateKey(gpriv)
	if err != nil {
		t.Fatal(err)
	}
	jpub, jpriv, _ := ed25519.GenerateKey(nil)
	other, _, _ := ed25519.GenerateKey(nil)
	ca := read(pki.CA)
	server := map[string][]byte{"tls.crt": read(pki.Server.Cert), "tls.key": read(pki.Server.Key), "ca.crt": ca}
	return secrets{
		byName: map[string]map[string][]byte{
			"tollgate-redis":                 {"password": []byte(redisPassword + "\n")},
			"tollgate-jwt":                   {"ci.pem": pubPEM(jpub), "people.pem": pubPEM(other)},
			"tollgate-grant":                 {"grant.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: gder}), "grant.pub": pubPEM(gpub)},
			"tollgate-api-tls":               server,
			"tollgate-executor-listener-tls": server,
			"tollgate-executor-client-tls":   {"tls.crt": read(pki.Executors["pool"].Cert), "tls.key": read(pki.Executors["pool"].Key), "ca.crt": ca},
			"tollgate-web":                   {"web.key": []byte(rand.Text() + rand.Text() + "\n")},
		},
		jwtKey: jpriv,
		caFile: pki.CA,
	}
}

// proc is one rendered container run as a process.
type proc struct {
	name    string
	args    []string          // as run here
	root    string            // the temp dir mounts are laid out under
	ports   map[int32]int32   // container port → the loopback port here
	addrs   map[string]string // listener flag → address here
	probes  []*corev1.Probe
	byName  map[string]int32
	cmd     *exec.Cmd
	log     *syncBuffer
	exited  chan struct{} // closed once the process has exited; waitErr is then set
	waitErr error
}

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

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// start lays out container's mounts under a temp dir and runs its command
// with its args and env as the kubelet would, rewriting what must differ
// here (see TestRenderedControlPlaneRuns); rewrite may change a flag's
// value further. An executor dials execAddr.
func start(t *testing.T, m *manifest, p *pod, container, bins string, sec secrets, execAddr string, rewrite func(flag, v string) string) *proc {
	t.Helper()
	var c corev1.Container
	for _, x := range p.spec.Containers {
		if x.Name == container {
			c = x
		}
	}
	pr := &proc{name: container, root: t.TempDir(), ports: map[int32]int32{}, addrs: map[string]string{}, byName: map[string]int32{},
		log: &syncBuffer{}, exited: make(chan struct{})}
	for _, cp := range c.Ports {
		pr.byName[cp.Name] = cp.ContainerPort
	}
	mounts := layOut(t, m, p, c, pr.root, sec)
	// Listen addresses first: the executor's config names the control
	// plane's, so the control plane is started first and its ports are known.
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = strings.TrimSuffix(p.owner[strings.Index(p.owner, "/")+1:], "-") + "-smoke-0"
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			q := c.Resources.Limits[corev1.ResourceMemory]
			env[e.Name] = fmt.Sprint(q.Value())
		default:
			t.Fatalf("%s env %s: a source this test cannot provide (%+v)", container, e.Name, e.ValueFrom)
		}
		env[e.Name] = underRoot(env[e.Name], mounts, pr.root)
	}
	var args []string
	for _, a := range c.Args {
		a = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			v, ok := env[envRef.FindStringSubmatch(ref)[1]]
			if !ok {
				t.Fatalf("%s arg %s: $(…) names no env", container, a)
			}
			return v
		})
		flag, v, ok := strings.Cut(a, "=")
		if ok && strings.HasSuffix(flag, "listen") {
			_, port := portOf(t, v)
			free := freePort(t)
			pr.ports[port] = free
			pr.addrs[flag] = net.JoinHostPort("127.0.0.1", fmt.Sprint(free))
			v = pr.addrs[flag]
		} else if ok {
			v = underRoot(v, mounts, pr.root)
		}
		if ok && rewrite != nil {
			v = rewrite(flag, v)
		}
		if ok {
			a = flag + "=" + v
		}
		args = append(args, a)
	}
	if container == "executor" {
		rewriteExecutorConfig(t, args, mounts, pr.root, execAddr)
	}
	for _, pb := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if pb != nil {
			pr.probes = append(pr.probes, pb)
		}
	}
	if len(c.Command) != 1 {
		t.Fatalf("%s: command %v: want the one binary", container, c.Command)
	}
	pr.args = args
	pr.cmd = exec.Command(filepath.Join(bins, filepath.Base(c.Command[0])), args...)
	pr.cmd.Env = []string{"PATH=" + bins}
	for k, v := range env {
		pr.cmd.Env = append(pr.cmd.Env, k+"="+v)
	}
	pr.cmd.Stdout, pr.cmd.Stderr = pr.log, pr.log
	if err := pr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { pr.waitErr = pr.cmd.Wait(); close(pr.exited) }()
	t.Cleanup(func() {
		select {
		case <-pr.exited:
		default:
			_ = pr.cmd.Process.Kill()
			<-pr.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", container, pr.log.String())
		}
	})
	return pr
}

// rewriteExecutorConfig puts the config (already laid out) under the root's
// paths and points control_plane at this machine's control plane.
func rewriteExecutorConfig(t *testing.T, args []string, mounts []string, root, addr string) {
	t.Helper()
	for _, a := range args {
		p, ok := strings.CutPrefix(a, "--config=")
		if !ok {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// One pass, so a path already under root (itself in /tmp) is
		// not rewritten again.
		quoted := make([]string, len(mounts))
		for i, mp := range mounts {
			quoted[i] = regexp.QuoteMeta(mp)
		}
		paths := regexp.MustCompile(`([\s,\[])(` + strings.Join(quoted, "|") + `)(/|\s|$)`)
		s := paths.ReplaceAllString(string(b), "${1}"+root+"${2}${3}")
		if addr == "" {
			t.Fatal("the control plane's executor listener is not known")
		}
		re := regexp.MustCompile(`(?m)^control_plane: .*$`)
		if !re.MatchString(s) {
			t.Fatalf("the executor config has no control_plane line:\n%s", s)
		}
		s = re.ReplaceAllString(s, "control_plane: "+addr)
		// The config is mounted read-only in the pod; here it is a copy.
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o400); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("the executor has no --config")
}

// layOut writes each of c's mounts under root as the kubelet would and
// returns the mount paths (longest first).
func layOut(t *testing.T, m *manifest, p *pod, c corev1.Container, root string, sec secrets) []string {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range p.spec.Volumes {
		vols[v.Name] = v
	}
	var paths []string
	for _, mnt := range c.VolumeMounts {
		dir := filepath.Join(root, mnt.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, mnt.MountPath)
		v := vols[mnt.Name]
		var data map[string][]byte
		var items []corev1.KeyToPath
		switch {
		case v.EmptyDir != nil:
			continue
		case v.ConfigMap != nil:
			cm := m.configMap(v.ConfigMap.Name)
			if cm == nil {
				t.Fatalf("ConfigMap %s is external: this test has none", v.ConfigMap.Name)
			}
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			items = v.ConfigMap.Items
		case v.Secret != nil:
			var ok bool
			if data, ok = sec.byName[v.Secret.SecretName]; !ok {
				t.Fatalf("Secret %s: the test makes no such Secret", v.Secret.SecretName)
			}
			items = v.Secret.Items
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				t.Fatalf("volume %s takes key %s, which its source does not hold", mnt.Name, it.Key)
			}
			// The kubelet's mode: defaultMode (0644 unless set), made
			// group-readable for the pod's fsGroup (which every pod of
			// the chart sets).
			mode := os.FileMode(0o644)
			if v.Secret != nil && v.Secret.DefaultMode != nil {
				mode = os.FileMode(*v.Secret.DefaultMode)
			} else if v.ConfigMap != nil && v.ConfigMap.DefaultMode != nil {
				mode = os.FileMode(*v.ConfigMap.DefaultMode)
			}
			if p.spec.SecurityContext != nil && p.spec.SecurityContext.FSGroup != nil {
				mode |= 0o440
			}
			// An item's path may name a folder (skills: NAME/SKILL.md).
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, it.Path)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, it.Path), b, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, it.Path), mode); err != nil {
				t.Fatal(err)
			}
		}
		// Read-only, as mounted.
		if mnt.ReadOnly {
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		}
	}
	slices.SortFunc(paths, func(a, b string) int { return len(b) - len(a) })
	return paths
}

func underRoot(v string, mounts []string, root string) string {
	for _, mp := range mounts {
		if v == mp || strings.HasPrefix(v, mp+"/") {
			return root + v
		}
	}
	return v
}

func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// probeURL is where probe pb reaches this process; "" for a probe that is
// not HTTP.
func (pr *proc) probeURL(t *testing.T, pb *corev1.Probe) string {
	t.Helper()
	if pb.HTTPGet == nil {
		t.Fatalf("%s: a probe that is not HTTP: add its check", pr.name)
	}
	port := pb.HTTPGet.Port.IntVal
	if pb.HTTPGet.Port.StrVal != "" {
		port = pr.byName[pb.HTTPGet.Port.StrVal]
	}
	here, ok := pr.ports[port]
	if !ok {
		t.Fatalf("%s: a probe asks port %d, which no listener serves", pr.name, port)
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", here, pb.HTTPGet.Path)
}

func get(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitProbes waits until every probe the chart gives the container
// passes, as the kubelet would see them, or the process exits.
func (pr *proc) waitProbes(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, pb := range pr.probes {
		url := pr.probeURL(t, pb)
		for get(url) != http.StatusOK {
			select {
			case <-pr.exited:
				t.Fatalf("%s exited before %s passed: %v\n%s", pr.name, url, pr.waitErr, pr.log.String())
			case <-time.After(50 * time.Millisecond): // polling the probe, as the kubelet does
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: probe %s never passed\n%s", pr.name, url, pr.log.String())
			}
		}
	}
}

// askServed asks each listener of the process for every path the served
// table gives its flag, as a browser or a scraper would, and wants 2xx
// from each. The web listener speaks TLS when the API does (--tls-cert),
// checked against caFile.
func (pr *proc) askServed(t *testing.T, caFile string) {
	t.Helper()
	tlsOn := slices.ContainsFunc(pr.args, func(a string) bool { return strings.HasPrefix(a, "--tls-cert=") })
	client := &http.Client{Timeout: 5 * time.Second}
	if tlsOn {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	asked := 0
	for flag, addr := range pr.addrs {
		scheme := "http"
		if flag == "--web-listen" && tlsOn {
			scheme = "https"
		}
		for _, path := range served[flag] {
			url := scheme + "://" + addr + path
			resp, err := client.Get(url)
			if err != nil {
				t.Errorf("%s %s: %v", pr.name, url, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Errorf("%s %s (%s): %s", pr.name, url, flag, resp.Status)
			}
			asked++
		}
	}
	t.Logf("%s: %d served paths answered", pr.name, asked)
}

// mcpAnswers calls the control plane's MCP gateway as an agent with
// token, as one reaches it through the -mcp Service: over the API's TLS
// (checked against caFile), refused without a token; the executor's
// tools are listed, a read-only one answers at once, and a side-effecting
// one (mcp.pending) answers at once with the ask it waits on.
func mcpAnswers(t *testing.T, cp *proc, caFile, token string) {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	url := "https://" + cp.addrs["--mcp-listen"] + "/mcp"
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatalf("the MCP gateway over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the MCP gateway answers a request with no token %s, want 401", resp.Status)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "chart-smoke", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, tr}}}, nil)
	if err != nil {
		t.Fatalf("connect to the MCP gateway at %s: %v\n%s", url, err, cp.log.String())
	}
	defer sess.Close()
	for {
		res, err := sess.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if slices.ContainsFunc(res.Tools, func(x *mcp.Tool) bool { return x.Name == "notes.store" }) &&
			slices.ContainsFunc(res.Tools, func(x *mcp.Tool) bool { return x.Name == "mcp-monitor.get_cpu_info" }) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the executor's tools are not listed: %d tools", len(res.Tools))
		case <-time.After(200 * time.Millisecond): // the executor's hello reaches the list within its refresh; no event to wait on
		}
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-monitor.get_cpu_info", Arguments: map[string]any{},
		Meta: mcp.Meta{"tollgate/idempotency_key": "smoke-cpu"}})
	if err != nil || res.IsError {
		t.Fatalf("a read-only call through the gateway: %v %s", err, mcpText(res))
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "notes.store", Arguments: map[string]any{"text": "from the agent"},
		Meta: mcp.Meta{"tollgate/idempotency_key": "smoke-note"}})
	if err != nil || !strings.Contains(mcpText(res), "PENDING APPROVAL") {
		t.Fatalf("a side-effecting call with mcp.pending: %v %s", err, mcpText(res))
	}
	t.Logf("mcp: a read-only call answered; a side-effecting one: %s", mcpText(res))
}

// bearer sends each request with the token.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func mcpText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// terminate sends SIGTERM and checks that readiness fails while the
// process still runs (a load balancer stops sending first) and that it
// exits 0 within grace seconds.
func (pr *proc) terminate(t *testing.T, grace *int64) {
	t.Helper()
	if grace == nil {
		t.Fatalf("%s: no terminationGracePeriodSeconds", pr.name)
	}
	var ready *corev1.Probe
	for _, pb := range pr.probes {
		if pb.HTTPGet != nil && pb.HTTPGet.Path == "/readyz" {
			ready = pb
		}
	}
	began := time.Now()
	if err := pr.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawNotReady := false
	limit := time.After(time.Duration(*grace) * time.Second)
	for {
		select {
		case <-pr.exited:
			if err := pr.waitErr; err != nil {
				t.Fatalf("%s exited after SIGTERM with %v\n%s", pr.name, err, pr.log.String())
			}
			if pr.name == "controlplane" && !sawNotReady {
				t.Fatalf("%s never reported not ready between SIGTERM and its exit (%v)", pr.name, time.Since(began))
			}
			t.Logf("%s: exited %v after SIGTERM (grace %ds)", pr.name, time.Since(began).Round(time.Millisecond), *grace)
			return
		case <-limit:
			t.Fatalf("%s still runs %ds after SIGTERM: the kubelet would kill it\n%s", pr.name, *grace, pr.log.String())
		case <-time.After(100 * time.Millisecond):
			if ready != nil && !sawNotReady {
				if code := get(pr.probeURL(t, ready)); code == http.StatusServiceUnavailable {
					sawNotReady = true
				}
			}
		}
	}
}
