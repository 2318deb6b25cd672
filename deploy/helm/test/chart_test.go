package charttest

import (
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tollgate-dev/tollgate/internal/executor"
)

// served is what each listener flag of Tollgate's binaries serves over
// HTTP without a credential (nil: nothing: gRPC, or the MCP gateway, whose
// every request carries a bearer token). The smoke test asks the running
// binaries for these paths, so this table cannot drift from them
// unnoticed; it calls the MCP gateway as an agent (mcpAnswers).
var served = map[string][]string{
	"--listen":          nil,
	"--executor-listen": nil,
	"--admin-listen":    {"/healthz", "/readyz", "/metrics"},
	"--web-listen":      {"/healthz", "/signin"},
	"--mcp-listen":      nil,
}

// TestChartRendersEveryValueSet: each CI value set renders, every document
// decodes strictly, and every check below holds for it.
func TestChartRendersEveryValueSet(t *testing.T) {
	for _, vs := range valueSets(t) {
		t.Run(filepath.Base(vs), func(t *testing.T) {
			m := render(t, vs)
			if len(m.pods()) == 0 {
				t.Fatal("no pod is rendered")
			}
			checkPortsAndProbes(t, m)
			checkNamedObjects(t, m)
			checkSecurity(t, m)
			checkPDB(t, m)
			checkServices(t, m)
			checkExecutor(t, m)
			checkNetworkPolicies(t, m)
			checkCertificates(t, m)
			checkWeb(t, m)
			checkMCP(t, m)
		})
	}
}

// listeners are a container's listener flags: flag → address.
func listeners(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, a := range c.Args {
		flag, v, ok := strings.Cut(a, "=")
		if ok && strings.HasSuffix(flag, "listen") {
			out[flag] = v
		}
	}
	return out
}

func portOf(t *testing.T, addr string) (host string, port int32) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return h, int32(n)
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// checkPortsAndProbes: a container's ports are exactly the ports its
// listener flags serve off loopback (one on loopback is not reachable
// from outside the pod, so it must not be declared); every container has
// liveness and readiness probes, and each probe asks a served port for a
// path that listener serves.
func checkPortsAndProbes(t *testing.T, m *manifest) {
	for _, p := range m.pods() {
		for _, c := range p.spec.Containers {
			where := p.owner + " " + c.Name
			flags := listeners(c)
			if len(flags) == 0 {
				t.Errorf("%s: no listener flag in its args %v", where, c.Args)
			}
			servedBy := map[int32]string{} // port → flag
			for flag, addr := range flags {
				if _, known := served[flag]; !known {
					t.Errorf("%s: listener flag %s is not in this test's table of what each serves", where, flag)
				}
				host, port := portOf(t, addr)
				if !loopback(host) {
					servedBy[port] = flag
				}
			}
			declared := map[int32]bool{}
			byName := map[string]int32{}
			for _, cp := range c.Ports {
				declared[cp.ContainerPort] = true
				byName[cp.Name] = cp.ContainerPort
				if _, ok := servedBy[cp.ContainerPort]; !ok {
					t.Errorf("%s: port %s (%d) is declared but no listener flag serves it off loopback (flags %v)", where, cp.Name, cp.ContainerPort, flags)
				}
			}
			for port, flag := range servedBy {
				if !declared[port] {
					t.Errorf("%s: %s serves port %d, which the container does not declare", where, flag, port)
				}
			}
			resolve := func(what string, ps intstr.IntOrString) (int32, string) {
				port := ps.IntVal
				if ps.Type == intstr.String {
					n, ok := byName[ps.StrVal]
					if !ok {
						t.Errorf("%s: %s names port %q, which the container does not declare", where, what, ps.StrVal)
						return 0, ""
					}
					port = n
				}
				flag, ok := servedBy[port]
				if !ok {
					t.Errorf("%s: %s asks port %d, which no listener serves", where, what, port)
				}
				return port, flag
			}
			probes := map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe}
			for _, kind := range []string{"liveness", "readiness"} {
				if probes[kind] == nil {
					t.Errorf("%s: no %s probe", where, kind)
				}
			}
			for kind, pr := range probes {
				if pr == nil {
					continue
				}
				switch {
				case pr.HTTPGet != nil:
					_, flag := resolve(kind+" probe", pr.HTTPGet.Port)
					if flag != "" && !slices.Contains(served[flag], pr.HTTPGet.Path) {
						t.Errorf("%s: %s probe asks %s for %s, which it does not serve (it serves %v)", where, kind, flag, pr.HTTPGet.Path, served[flag])
					}
				case pr.GRPC != nil:
					resolve(kind+" probe", intstr.FromInt32(pr.GRPC.Port))
				case pr.TCPSocket != nil:
					resolve(kind+" probe", pr.TCPSocket.Port)
				default:
					t.Errorf("%s: %s probe is neither HTTP, gRPC nor TCP (an exec probe needs a shell the image has not)", where, kind)
				}
			}
			if rp := c.ReadinessProbe; rp != nil && rp.HTTPGet != nil && rp.HTTPGet.Path != "/readyz" {
				t.Errorf("%s: readiness asks %s; only /readyz turns NOT_SERVING during a drain", where, rp.HTTPGet.Path)
			}
		}
	}
}

// checkNamedObjects: every Secret and ConfigMap a pod names (volumes, env,
// image pull secrets) is rendered here, made by a rendered cert-manager
// Certificate, or named by an existingSecret/existingConfigMap value that
// README.md documents; a rendered ConfigMap holds the keys a pod takes
// from it; every file a flag names lies under a mount that holds it.
func checkNamedObjects(t *testing.T, m *manifest) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	external := externalNames(m.values)
	rendered := map[string]bool{}
	for _, c := range m.configMaps {
		rendered["ConfigMap/"+c.Name] = true
	}
	for _, s := range m.secrets {
		rendered["Secret/"+s.Name] = true
	}
	for _, c := range m.certificates {
		rendered["Secret/"+c.Spec.SecretName] = true
	}
	named := func(where, kind, name string) {
		if rendered[kind+"/"+name] {
			return
		}
		paths, ok := external[name]
		if !ok {
			t.Errorf("%s names %s %q, which is neither rendered nor named by an existingSecret/existingConfigMap value", where, kind, name)
			return
		}
		for _, p := range paths {
			if !strings.Contains(string(readme), "`"+p+"`") {
				t.Errorf("%s names %s %q (from %s), an external object README.md does not document (no `%s` in it)", where, kind, name, p, p)
			}
		}
	}
	for _, p := range m.pods() {
		for _, s := range p.spec.ImagePullSecrets {
			named(p.owner, "Secret", s.Name)
		}
		vols := map[string]corev1.Volume{}
		for _, v := range p.spec.Volumes {
			vols[v.Name] = v
			switch {
			case v.Secret != nil:
				named(p.owner+" volume "+v.Name, "Secret", v.Secret.SecretName)
			case v.ConfigMap != nil:
				named(p.owner+" volume "+v.Name, "ConfigMap", v.ConfigMap.Name)
				if cm := m.configMap(v.ConfigMap.Name); cm != nil {
					for _, it := range v.ConfigMap.Items {
						if _, ok := cm.Data[it.Key]; !ok {
							t.Errorf("%s volume %s takes key %q that ConfigMap %s does not hold", p.owner, v.Name, it.Key, cm.Name)
						}
					}
				}
			case v.EmptyDir != nil:
			case v.Projected != nil:
				t.Errorf("%s volume %s is projected: add its checks here", p.owner, v.Name)
			default:
				t.Errorf("%s volume %s: only Secrets, ConfigMaps and emptyDirs are expected (no hostPath)", p.owner, v.Name)
			}
		}
		for _, c := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
			where := p.owner + " " + c.Name
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					named(where+" env "+e.Name, "Secret", e.ValueFrom.SecretKeyRef.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					named(where+" env "+e.Name, "ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name)
				}
			}
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					named(where+" envFrom", "Secret", e.SecretRef.Name)
				}
				if e.ConfigMapRef != nil {
					named(where+" envFrom", "ConfigMap", e.ConfigMapRef.Name)
				}
			}
			for _, mnt := range c.VolumeMounts {
				if _, ok := vols[mnt.Name]; !ok {
					t.Errorf("%s mounts volume %s, which the pod does not have", where, mnt.Name)
				}
				if mnt.SubPath != "" {
					t.Errorf("%s mounts %s with subPath: a subPath mount never sees an update (policy, certificates)", where, mnt.MountPath)
				}
			}
			for _, a := range c.Args {
				_, v, ok := strings.Cut(a, "=")
				if ok && strings.HasPrefix(v, "/") {
					checkMounted(t, m, where+" "+a, c, vols, v)
				}
			}
		}
	}
}

// checkMounted: file lies under a mount of c whose volume holds it (its
// items, or the keys of a rendered ConfigMap); a path under an emptyDir
// is a directory the program writes.
func checkMounted(t *testing.T, m *manifest, where string, c corev1.Container, vols map[string]corev1.Volume, file string) {
	for _, mnt := range c.VolumeMounts {
		rel, err := filepath.Rel(mnt.MountPath, file)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		v := vols[mnt.Name]
		var keys []string
		switch {
		case v.EmptyDir != nil:
			return
		case v.Secret != nil:
			for _, it := range v.Secret.Items {
				keys = append(keys, it.Path)
			}
		case v.ConfigMap != nil:
			for _, it := range v.ConfigMap.Items {
				keys = append(keys, it.Path)
			}
			if cm := m.configMap(v.ConfigMap.Name); cm != nil && len(v.ConfigMap.Items) == 0 {
				for k := range cm.Data {
					keys = append(keys, k)
				}
			}
		}
		// rel "." is a flag that names the mounted directory itself
		// (--skills-dir): what it holds is the program's to read.
		if keys != nil && rel != "." && !slices.Contains(keys, rel) {
			t.Errorf("%s: %s is under %s, whose volume %s holds only %v", where, file, mnt.MountPath, mnt.Name, keys)
		}
		if !mnt.ReadOnly && v.EmptyDir == nil {
			t.Errorf("%s: %s is mounted read-write", where, mnt.MountPath)
		}
		return
	}
	t.Errorf("%s: %s is under no mount of the container", where, file)
}

// checkSecurity: every pod runs as a non-root user with the runtime's
// seccomp profile and no service-account token; every container with a
// read-only root, no privilege escalation, every capability dropped and
// resource requests and limits for CPU and memory.
func checkSecurity(t *testing.T, m *manifest) {
	for _, p := range m.pods() {
		ps := p.spec.SecurityContext
		switch {
		case ps == nil:
			t.Errorf("%s: no pod security context", p.owner)
			continue
		case ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot:
			t.Errorf("%s: runAsNonRoot is not true", p.owner)
		case ps.RunAsUser == nil || *ps.RunAsUser == 0:
			t.Errorf("%s: runAsUser is not a non-root uid", p.owner)
		case ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("%s: seccomp profile is not RuntimeDefault", p.owner)
		}
		if p.spec.HostNetwork || p.spec.HostPID || p.spec.HostIPC {
			t.Errorf("%s: shares a host namespace", p.owner)
		}
		if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
			t.Errorf("%s: mounts a service-account token it never uses", p.owner)
		}
		for _, c := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
			where := p.owner + " " + c.Name
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no security context", where)
				continue
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: the root filesystem is not read-only", where)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s: privileged", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities are not all dropped (%+v)", where, sc.Capabilities)
			}
			if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				t.Errorf("%s: runs as root", where)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("%s: no %s request", where, r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					t.Errorf("%s: no %s limit", where, r)
				}
			}
		}
	}
}

// count is a PDB value as Kubernetes counts it among n pods: an integer,
// or a percentage rounded up.
func count(t *testing.T, v *intstr.IntOrString, n int) int {
	t.Helper()
	if v.Type == intstr.Int {
		return int(v.IntVal)
	}
	pct, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil {
		t.Fatalf("PDB value %q", v.StrVal)
	}
	return (pct*n + 99) / 100
}

// checkPDB: a PDB selects the control plane's pods and, at its least
// number of replicas, leaves at least one disruptable and one available.
// In dev mode (one replica) there must be none: it would block every drain.
func checkPDB(t *testing.T, m *manifest) {
	cp := m.podWith("controlplane")
	if cp == nil {
		t.Fatal("no control-plane pod")
	}
	if len(m.pdbs) == 0 && cp.replicas > 1 {
		t.Errorf("%d control-plane replicas and no PodDisruptionBudget", cp.replicas)
	}
	for _, pdb := range m.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(cp.meta.Labels)) {
			t.Errorf("PDB %s does not select the control-plane pods", pdb.Name)
		}
		n := cp.replicas
		var available int
		switch {
		case pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable != nil:
			t.Errorf("PDB %s sets both minAvailable and maxUnavailable", pdb.Name)
			continue
		case pdb.Spec.MinAvailable != nil:
			available = count(t, pdb.Spec.MinAvailable, n)
		case pdb.Spec.MaxUnavailable != nil:
			available = n - count(t, pdb.Spec.MaxUnavailable, n)
		default:
			t.Errorf("PDB %s sets neither minAvailable nor maxUnavailable", pdb.Name)
			continue
		}
		if available < 1 {
			t.Errorf("PDB %s at %d replicas keeps none available", pdb.Name, n)
		}
		if n-available < 1 {
			t.Errorf("PDB %s at %d replicas leaves none disruptable: a node drain never finishes", pdb.Name, n)
		}
	}
}

// checkServices: each Service selects a rendered pod, and each of its
// ports reaches a port a container of that pod declares.
func checkServices(t *testing.T, m *manifest) {
	for _, s := range m.services {
		var match *pod
		for _, p := range m.pods() {
			if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.meta.Labels)) {
				match = &p
			}
		}
		if match == nil {
			t.Errorf("Service %s selects no rendered pod", s.Name)
			continue
		}
		for _, sp := range s.Spec.Ports {
			found := false
			for _, c := range match.spec.Containers {
				for _, cp := range c.Ports {
					if (sp.TargetPort.Type == intstr.String && cp.Name == sp.TargetPort.StrVal) || (sp.TargetPort.Type == intstr.Int && cp.ContainerPort == sp.TargetPort.IntVal) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("Service %s port %s targets %s, which no container of %s declares", s.Name, sp.Name, sp.TargetPort.String(), match.owner)
			}
		}
		if strings.HasSuffix(s.Name, "-admin") && s.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("the admin Service %s is %s: it must stay cluster-internal", s.Name, s.Spec.Type)
		}
	}
}

// servicePort resolves HOST:PORT of a Service's cluster DNS name to the
// container port behind it; ok is false when it names no rendered Service.
func (m *manifest) servicePort(t *testing.T, addr string) (svc *corev1.Service, target int32, ok bool) {
	host, port := portOf(t, addr)
	name, rest, _ := strings.Cut(host, ".")
	if ns, _, _ := strings.Cut(rest, "."); ns != namespace {
		return nil, 0, false
	}
	svc = m.service(name)
	if svc == nil {
		return nil, 0, false
	}
	cp := m.podWith("controlplane")
	for _, sp := range svc.Spec.Ports {
		if sp.Port != port {
			continue
		}
		for _, c := range cp.spec.Containers {
			for _, p := range c.Ports {
				if p.Name == sp.TargetPort.StrVal || p.ContainerPort == sp.TargetPort.IntVal {
					return svc, p.ContainerPort, true
				}
			}
		}
	}
	return svc, 0, false
}

// checkExecutor: the executor's config (read by the executor's own
// loader) points first at the executor Service, which reaches the control
// plane's --executor-listen port; the files it names are mounted; its
// identity is what the client certificate carries.
func checkExecutor(t *testing.T, m *manifest) {
	ex := m.podWith("executor")
	if ex == nil {
		if m.values["dev"] != true && m.values["executor"].(map[string]any)["enabled"] != false {
			t.Fatal("no executor pod")
		}
		return
	}
	var c corev1.Container
	for _, x := range ex.spec.Containers {
		if x.Name == "executor" {
			c = x
		}
	}
	cfgPath := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			cfgPath = v
		}
	}
	if cfgPath == "" {
		t.Fatalf("the executor has no --config: %v", c.Args)
	}
	fc := executorConfig(t, m, ex, c, cfgPath)
	svc, target, ok := m.servicePort(t, fc.ControlPlane)
	if !ok {
		t.Fatalf("the executor's control_plane %s is not a rendered Service in %s", fc.ControlPlane, namespace)
	}
	cp := m.podWith("controlplane")
	var listen string
	for _, x := range cp.spec.Containers {
		listen = listeners(x)["--executor-listen"]
	}
	if _, port := portOf(t, listen); port != target {
		t.Errorf("Service %s reaches port %d, but the control plane's --executor-listen is %s", svc.Name, target, listen)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range ex.spec.Volumes {
		vols[v.Name] = v
	}
	files := []string{fc.TLS.Cert, fc.TLS.Key, fc.TLS.CA}
	for _, k := range fc.GrantKeys {
		files = append(files, k)
	}
	for _, f := range files {
		checkMounted(t, m, "executor config", c, vols, f)
	}
	if len(fc.GrantKeys) == 0 {
		t.Error("the executor trusts no grant key: it would refuse every side effect")
	}
	for _, v := range ex.spec.Volumes {
		if v.Secret != nil {
			for _, it := range v.Secret.Items {
				if strings.HasSuffix(it.Key, ".key") && strings.Contains(it.Key, "grant") {
					t.Errorf("the executor mounts %s: the grant signing key belongs to the control plane only", it.Key)
				}
			}
		}
	}
	// The identity the control plane will read.
	for _, cert := range m.certificates {
		if !slices.Contains(cert.Spec.Usages, "client auth") {
			continue
		}
		want := fmt.Sprintf("spiffe://%s/executor/%s", m.values["trustDomain"], fc.ID)
		if !slices.Equal(cert.Spec.URIs, []string{want}) {
			t.Errorf("the executor client certificate carries %v; the executor says it is %s", cert.Spec.URIs, want)
		}
	}
}

// executorConfig is the executor's config as the executor's own loader
// reads it from the rendered ConfigMap (unknown keys refused).
func executorConfig(t *testing.T, m *manifest, ex *pod, c corev1.Container, cfgPath string) executor.FileConfig {
	t.Helper()
	dir, file := path.Split(cfgPath)
	for _, mnt := range c.VolumeMounts {
		if strings.TrimSuffix(mnt.MountPath, "/") != strings.TrimSuffix(dir, "/") {
			continue
		}
		for _, v := range ex.spec.Volumes {
			if v.Name != mnt.Name || v.ConfigMap == nil {
				continue
			}
			cm := m.configMap(v.ConfigMap.Name)
			if cm == nil {
				t.Fatalf("the executor's config ConfigMap %s is not rendered", v.ConfigMap.Name)
			}
			p := filepath.Join(t.TempDir(), file)
			if err := os.WriteFile(p, []byte(cm.Data[file]), 0o600); err != nil {
				t.Fatal(err)
			}
			fc, err := executor.LoadConfig(p, func(string) string { return "" })
			if err != nil {
				t.Fatalf("the executor would not start on the rendered config: %v\n%s", err, cm.Data[file])
			}
			return fc
		}
	}
	t.Fatalf("--config=%s is not in a mounted ConfigMap", cfgPath)
	return executor.FileConfig{}
}

// checkNetworkPolicies: when rendered, the control plane's policy selects
// its pods and lets each port be reached, the executor port only from the
// chart's executors and the peers given, the admin port only from the
// scraper's peers.
func checkNetworkPolicies(t *testing.T, m *manifest) {
	np, _ := m.values["networkPolicy"].(map[string]any)
	if np["enabled"] != true {
		if len(m.netpols) > 0 {
			t.Error("NetworkPolicy rendered while networkPolicy.enabled is false")
		}
		return
	}
	cp, ex := m.podWith("controlplane"), m.podWith("executor")
	found := false
	for _, pol := range m.netpols {
		sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(cp.meta.Labels)) {
			continue
		}
		found = true
		ports := map[string]bool{}
		for _, rule := range pol.Spec.Ingress {
			for _, p := range rule.Ports {
				ports[p.Port.String()] = true
				if p.Port.String() == "executor" {
					if len(rule.From) == 0 {
						t.Error("the executor port is open to anyone")
					}
					if ex != nil {
						ok := false
						for _, f := range rule.From {
							if f.PodSelector != nil {
								s, _ := metav1.LabelSelectorAsSelector(f.PodSelector)
								ok = ok || s.Matches(labels.Set(ex.meta.Labels))
							}
							if f.PodSelector != nil && len(f.PodSelector.MatchLabels) == 0 && len(f.PodSelector.MatchExpressions) == 0 {
								t.Error("the executor port is open to every pod")
							}
						}
						if !ok {
							t.Error("the chart's executors may not reach the executor port")
						}
					}
				}
				if p.Port.String() == "admin" && len(rule.From) == 0 {
					t.Error("the admin port is open to anyone")
				}
				if p.Port.String() == "web" {
					// The people's door: webFrom, or anyone when it is empty.
					want, _ := np["webFrom"].([]any)
					if len(rule.From) != len(want) {
						t.Errorf("the web port admits %d peers; networkPolicy.webFrom gives %d (none: anyone)", len(rule.From), len(want))
					}
				}
				if p.Port.String() == "mcp" {
					// The agents' door: mcpFrom, or anyone when it is empty.
					want, _ := np["mcpFrom"].([]any)
					if len(rule.From) != len(want) {
						t.Errorf("the mcp port admits %d peers; networkPolicy.mcpFrom gives %d (none: anyone)", len(rule.From), len(want))
					}
				}
			}
		}
		for _, c := range cp.spec.Containers {
			for _, p := range c.Ports {
				if !ports[p.Name] {
					t.Errorf("the control plane's NetworkPolicy lets nothing reach port %s", p.Name)
				}
			}
		}
	}
	if !found {
		t.Error("no NetworkPolicy selects the control-plane pods")
	}
}

// checkCertificates: with cert-manager, the executor listener's certificate
// names the host executors dial, and the API's names the API Service.
func checkCertificates(t *testing.T, m *manifest) {
	if len(m.certificates) == 0 {
		return
	}
	ex := m.podWith("executor")
	for _, cert := range m.certificates {
		if cert.Spec.IssuerRef.Name == "" {
			t.Errorf("Certificate %s has no issuer", cert.Name)
		}
		if slices.Contains(cert.Spec.Usages, "client auth") {
			continue
		}
		svc := strings.TrimSuffix(strings.TrimPrefix(cert.Spec.SecretName, ""), "-tls")
		svc = strings.TrimSuffix(svc, "-listener")
		if m.service(svc) == nil {
			t.Errorf("Certificate %s (secret %s) is for Service %s, which is not rendered", cert.Name, cert.Spec.SecretName, svc)
		}
		if want := svc + "." + namespace + ".svc"; !slices.Contains(cert.Spec.DNSNames, want) {
			t.Errorf("Certificate %s does not name %s", cert.Name, want)
		}
	}
	if ex != nil {
		for _, c := range ex.spec.Containers {
			for _, a := range c.Args {
				if p, ok := strings.CutPrefix(a, "--config="); ok {
					fc := executorConfig(t, m, ex, c, p)
					host, _ := portOf(t, fc.ControlPlane)
					ok := false
					for _, cert := range m.certificates {
						ok = ok || slices.Contains(cert.Spec.DNSNames, host)
					}
					if !ok {
						t.Errorf("no certificate names %s, the host executors dial: their TLS check would fail", host)
					}
				}
			}
		}
	}
}

// checkWeb: with web.enabled, the control plane serves the inbox off
// loopback at the address web.url names, with the key and the OpenID
// provider it needs; the -web Service reaches --web-listen; its Ingress
// routes web.url's host there (with TLS for that host when a Secret is
// named); cert-manager's API certificate, which the listener serves, names
// the host; Slack's buttons have the web listener to call. Off, none of
// it is rendered.
func checkWeb(t *testing.T, m *manifest) {
	web, _ := m.values["web"].(map[string]any)
	slack, _ := m.values["slack"].(map[string]any)
	cp := m.podWith("controlplane")
	var c corev1.Container
	for _, x := range cp.spec.Containers {
		if x.Name == "controlplane" {
			c = x
		}
	}
	args := map[string][]string{}
	for _, a := range c.Args {
		flag, v, _ := strings.Cut(a, "=")
		args[flag] = append(args[flag], v)
	}
	svc := m.service(release + "-tollgate-web")
	if web["enabled"] != true || m.values["dev"] == true {
		if svc != nil || len(m.ingresses) > 0 {
			t.Error("a web Service or Ingress is rendered while web.enabled is false")
		}
		if addr := listeners(c)["--web-listen"]; addr != "" {
			if host, _ := portOf(t, addr); !loopback(host) {
				t.Errorf("--web-listen %s is off loopback while web.enabled is false", addr)
			}
		}
		if slack["enabled"] == true && len(args["--slack-signing-secret-file"]) > 0 {
			t.Error("Slack's buttons are on with no web listener to call")
		}
		return
	}
	url, _ := web["url"].(string)
	url = strings.TrimSuffix(url, "/")
	host, _, _ := strings.Cut(strings.TrimPrefix(url, "https://"), "/")
	host, _, _ = strings.Cut(host, ":")
	switch {
	case !strings.HasPrefix(url, "https://"):
		t.Errorf("web.url %q is not https", url)
	case !slices.Equal(args["--web-url"], []string{url}):
		t.Errorf("--web-url is %v; web.url is %s", args["--web-url"], url)
	case len(args["--web-key"]) != 1:
		t.Errorf("no --web-key: %v", c.Args)
	case len(args["--oidc-issuer"]) != 1:
		t.Error("the web inbox has no OpenID provider: nobody could sign in")
	}
	listen := listeners(c)["--web-listen"]
	if listen == "" {
		t.Fatal("web.enabled, and the control plane has no --web-listen")
	}
	if h, _ := portOf(t, listen); loopback(h) {
		t.Errorf("--web-listen %s is on loopback: nothing outside the pod reaches it", listen)
	}
	if svc == nil {
		t.Fatal("web.enabled, and no -web Service is rendered")
	}
	_, want := portOf(t, listen)
	tlsOn := len(args["--tls-cert"]) == 1
	for _, sp := range svc.Spec.Ports {
		_, target, ok := m.servicePort(t, fmt.Sprintf("%s.%s.svc:%d", svc.Name, namespace, sp.Port))
		if !ok || target != want {
			t.Errorf("Service %s port %d reaches %d; --web-listen is %s", svc.Name, sp.Port, target, listen)
		}
		if wantProto := map[bool]string{true: "https", false: "http"}[tlsOn]; sp.AppProtocol == nil || *sp.AppProtocol != wantProto {
			t.Errorf("Service %s port %s: appProtocol %v, the listener speaks %s", svc.Name, sp.Name, sp.AppProtocol, wantProto)
		}
	}
	ing, _ := web["ingress"].(map[string]any)
	if (ing["enabled"] == true) != (len(m.ingresses) == 1) {
		t.Errorf("web.ingress.enabled is %v and %d Ingresses are rendered", ing["enabled"], len(m.ingresses))
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range m.ingresses {
		if len(in.Spec.Rules) != 1 || in.Spec.Rules[0].Host != host || in.Spec.Rules[0].HTTP == nil {
			t.Errorf("Ingress %s: rules %+v; want one for %s", in.Name, in.Spec.Rules, host)
			continue
		}
		for _, p := range in.Spec.Rules[0].HTTP.Paths {
			b := p.Backend.Service
			if b == nil || b.Name != svc.Name {
				t.Errorf("Ingress %s path %s does not lead to Service %s", in.Name, p.Path, svc.Name)
				continue
			}
			if _, target, ok := m.servicePort(t, fmt.Sprintf("%s.%s.svc:%d", b.Name, namespace, b.Port.Number)); !ok || target != want {
				t.Errorf("Ingress %s leads to %s port %d, which does not reach --web-listen %s", in.Name, b.Name, b.Port.Number, listen)
			}
		}
		for _, tl := range in.Spec.TLS {
			if !slices.Contains(tl.Hosts, host) {
				t.Errorf("Ingress %s TLS for %v, not %s", in.Name, tl.Hosts, host)
			}
			if tl.SecretName != ing["tlsSecret"] || !strings.Contains(string(readme), "`web.ingress.tlsSecret`") {
				t.Errorf("Ingress %s names Secret %s: not web.ingress.tlsSecret, or README.md does not document `web.ingress.tlsSecret`", in.Name, tl.SecretName)
			}
		}
		if tlsOn && in.Annotations["nginx.ingress.kubernetes.io/backend-protocol"] != "HTTPS" {
			t.Errorf("Ingress %s: the listener speaks TLS, and ingress-nginx is not told so", in.Name)
		}
	}
	for _, cert := range m.certificates {
		if strings.HasSuffix(cert.Spec.SecretName, "-api-tls") && !slices.Contains(cert.Spec.DNSNames, host) {
			t.Errorf("Certificate %s, which the web listener serves, does not name %s", cert.Name, host)
		}
	}
}

// controlPlaneArgs are the control-plane container's args by flag (a flag
// with no value: one ""), in order.
func controlPlaneArgs(m *manifest) (corev1.Container, map[string][]string) {
	var c corev1.Container
	for _, x := range m.podWith("controlplane").spec.Containers {
		if x.Name == "controlplane" {
			c = x
		}
	}
	args := map[string][]string{}
	for _, a := range c.Args {
		flag, v, _ := strings.Cut(a, "=")
		args[flag] = append(args[flag], v)
	}
	return c, args
}

// checkMCP: agentOwners are the --agent-owner args, in order. With
// mcp.enabled, the control plane serves the MCP gateway off loopback at
// mcp.port, with the API's certificate (bearer tokens cross it), and
// --mcp-pending as mcp.pending says; the -mcp Service reaches
// --mcp-listen, says https, and keeps a client on the replica holding its
// session; cert-manager's API certificate names the Service. In dev mode
// the gateway is on the pod's loopback at mcp.port; off, it is not served.
// Neither renders a Service.
func checkMCP(t *testing.T, m *manifest) {
	mcpv, _ := m.values["mcp"].(map[string]any)
	c, args := controlPlaneArgs(m)
	var owners []string
	given, _ := m.values["agentOwners"].([]any)
	for _, o := range given {
		owners = append(owners, fmt.Sprint(o))
	}
	if !slices.Equal(args["--agent-owner"], owners) {
		t.Errorf("--agent-owner args %q; agentOwners is %q", args["--agent-owner"], owners)
	}
	port := int32(mcpv["port"].(float64))
	dev := m.values["dev"] == true
	on := mcpv["enabled"] == true || dev
	if pending := len(args["--mcp-pending"]) == 1; pending != (on && mcpv["pending"] == true) {
		t.Errorf("--mcp-pending rendered: %v; mcp.pending is %v, the gateway on: %v", pending, mcpv["pending"], on)
	}
	svc := m.service(release + "-tollgate-mcp")
	listen := listeners(c)["--mcp-listen"]
	if !on {
		if listen != "" || svc != nil {
			t.Errorf("mcp.enabled is false, and --mcp-listen is %q, the -mcp Service rendered: %v", listen, svc != nil)
		}
		return
	}
	if listen == "" {
		t.Fatal("the MCP gateway is on, and the control plane has no --mcp-listen")
	}
	host, got := portOf(t, listen)
	if got != port {
		t.Errorf("--mcp-listen %s; mcp.port is %d", listen, port)
	}
	if dev {
		if !loopback(host) || svc != nil {
			t.Errorf("dev mode: --mcp-listen %s must be on loopback and no Service rendered (have one: %v)", listen, svc != nil)
		}
		return
	}
	if loopback(host) {
		t.Errorf("--mcp-listen %s is on loopback: nothing outside the pod reaches it", listen)
	}
	if len(args["--tls-cert"]) != 1 {
		t.Error("the MCP gateway is off loopback without --tls-cert: bearer tokens over plain HTTP (the control plane refuses to start)")
	}
	if svc == nil {
		t.Fatal("mcp.enabled, and no -mcp Service is rendered")
	}
	service, _ := mcpv["service"].(map[string]any)
	if string(svc.Spec.Type) != service["type"] {
		t.Errorf("Service %s is %s; mcp.service.type is %v", svc.Name, svc.Spec.Type, service["type"])
	}
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		t.Errorf("Service %s has sessionAffinity %q: a client's next request may reach a replica that does not hold its MCP session", svc.Name, svc.Spec.SessionAffinity)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Errorf("Service %s has ports %+v; want the one", svc.Name, svc.Spec.Ports)
	}
	for _, sp := range svc.Spec.Ports {
		if _, target, ok := m.servicePort(t, fmt.Sprintf("%s.%s.svc:%d", svc.Name, namespace, sp.Port)); !ok || target != port {
			t.Errorf("Service %s port %d reaches %d; --mcp-listen is %s", svc.Name, sp.Port, target, listen)
		}
		if sp.AppProtocol == nil || *sp.AppProtocol != "https" {
			t.Errorf("Service %s port %s: appProtocol %v, the gateway speaks https", svc.Name, sp.Name, sp.AppProtocol)
		}
	}
	for _, cert := range m.certificates {
		if want := svc.Name + "." + namespace + ".svc"; strings.HasSuffix(cert.Spec.SecretName, "-api-tls") && !slices.Contains(cert.Spec.DNSNames, want) {
			t.Errorf("Certificate %s, which the MCP gateway serves, does not name %s", cert.Name, want)
		}
	}
}

// TestChartMCP: ci/mcp-values.yaml renders the gateway it asks for (a
// guard against checkMCP passing for want of a value set that turns it
// on): --mcp-listen on its port with --mcp-pending, the container port
// named mcp, the -mcp Service of the type and annotations given, the
// NetworkPolicy rule from mcpFrom only, and one --agent-owner per owner.
func TestChartMCP(t *testing.T) {
	m := render(t, filepath.Join(chartDir, "ci", "mcp-values.yaml"))
	c, args := controlPlaneArgs(m)
	if !slices.Equal(args["--mcp-listen"], []string{":8446"}) || !slices.Equal(args["--mcp-pending"], []string{""}) {
		t.Errorf("--mcp-listen %q, --mcp-pending %q; want :8446 and the flag", args["--mcp-listen"], args["--mcp-pending"])
	}
	if want := []string{"deploy-bot=alice", "triage-agent=bob@acme.example"}; !slices.Equal(args["--agent-owner"], want) {
		t.Errorf("--agent-owner %q; want %q", args["--agent-owner"], want)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "mcp" && p.ContainerPort == 8446 }) {
		t.Errorf("no container port mcp 8446: %+v", c.Ports)
	}
	svc := m.service(release + "-tollgate-mcp")
	switch {
	case svc == nil:
		t.Fatal("no -mcp Service")
	case svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] != "true":
		t.Errorf("Service %s: type %s, annotations %v", svc.Name, svc.Spec.Type, svc.Annotations)
	case len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8446 || svc.Spec.Ports[0].TargetPort.StrVal != "mcp":
		t.Errorf("Service %s ports %+v; want 8446 → mcp", svc.Name, svc.Spec.Ports)
	}
	rules := 0
	for _, pol := range m.netpols {
		for _, rule := range pol.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port.String() != "mcp" {
					continue
				}
				rules++
				if len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "agents" {
					t.Errorf("NetworkPolicy %s admits %+v to the mcp port; want the agents namespace only", pol.Name, rule.From)
				}
			}
		}
	}
	if rules != 1 {
		t.Errorf("%d NetworkPolicy rules for the mcp port; want one", rules)
	}
	// Off (the default): no listener, no port, no Service.
	m = render(t, filepath.Join(chartDir, "ci", "mcp-values.yaml"), "mcp.enabled=false", "mcp.pending=false", "agentOwners=null")
	c, args = controlPlaneArgs(m)
	if len(args["--mcp-listen"])+len(args["--mcp-pending"])+len(args["--agent-owner"]) > 0 || m.service(release+"-tollgate-mcp") != nil ||
		slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "mcp" }) {
		t.Errorf("mcp.enabled false still renders the gateway: args %q, ports %+v", c.Args, c.Ports)
	}
}

// TestChartRefuses: the combinations that cannot run do not render, each
// with a reason that names the value to change.
func TestChartRefuses(t *testing.T) {
	def := filepath.Join(chartDir, "ci", "default-values.yaml")
	web := filepath.Join(chartDir, "ci", "web-slack-values.yaml")
	for _, c := range []struct {
		name, values string
		set          []string
		want         string
	}{
		{"no redis", "", nil, "redis.url is required"},
		{"dev with redis", filepath.Join(chartDir, "ci", "dev-values.yaml"), []string{"redis.url=redis://r:6379"}, "drop redis.url"},
		{"dev with hpa", filepath.Join(chartDir, "ci", "dev-values.yaml"), []string{"controlPlane.hpa.enabled=true"}, "one replica"},
		{"password in url", def, []string{"redis.url=redis://:hunter2@r:6379/0"}, "redis.password.existingSecret"},
		{"no grant key", def, []string{"grantKey.existingSecret="}, "grantKey.existingSecret is required"},
		{"no policy", def, []string{"policy.csv="}, "policy.csv (or policy.existingConfigMap) is required"},
		{"grace too short", def, []string{"controlPlane.drainTimeout=60s"}, "terminationGracePeriodSeconds"},
		{"executor grace too short", def, []string{"executor.drainTimeout=25s"}, "executor.terminationGracePeriodSeconds"},
		{"pdb blocks drains", def, []string{"controlPlane.pdb.maxUnavailable=", "controlPlane.pdb.minAvailable=3"}, "leaves no replica"},
		{"pdb 100%", def, []string{"controlPlane.pdb.maxUnavailable=", "controlPlane.pdb.minAvailable=100%"}, "leaves no replica"},
		{"pdb both", def, []string{"controlPlane.pdb.minAvailable=1"}, "not both"},
		{"pdb one replica", def, []string{"controlPlane.replicas=1"}, "fewer than 2 replicas"},
		{"no api cert", def, []string{"tls.api.existingSecret="}, "tls.api.existingSecret is required"},
		{"unknown value", def, []string{"controlPlane.replica=3"}, "additional properties"},
		{"bad duration", def, []string{"controlPlane.drainDelay=5 seconds"}, "drainDelay"},
		{"ca without tls", def, []string{"redis.ca.existingSecret=ca"}, "rediss://"},
		{"no token signer", def, []string{"jwt.existingSecret=", "jwt.keyIDs=null"}, "(or oidc.issuer) are required"},
		{"oidc without a client", def, []string{"oidc.issuer=https://idp.example"}, "oidc.clientID is required"},
		{"web without url", web, []string{"web.url="}, "web.url is required"},
		{"web over http", web, []string{"web.url=http://inbox.acme.example"}, "must be https://"},
		{"web without key", web, []string{"web.key.existingSecret="}, "web.key.existingSecret is required"},
		{"web without sign-in", def, []string{"web.enabled=true", "web.url=https://inbox.example", "web.key.existingSecret=k"}, "web.enabled needs oidc.issuer"},
		{"web in dev", filepath.Join(chartDir, "ci", "dev-values.yaml"), []string{"web.enabled=true"}, "set web.enabled: false"},
		{"web on the api port", web, []string{"web.port=7443"}, "already a port of controlPlane.ports"},
		{"ingress without web", def, []string{"web.ingress.enabled=true"}, "web.ingress.enabled needs web.enabled"},
		{"web url with a path", web, []string{"web.url=https://acme.example/inbox"}, "/web/url"},
		{"slack buttons without web", web, []string{"web.enabled=false", "web.ingress.enabled=false"}, "slack.signingSecret.existingSecret needs web.enabled"},
		{"slack without token", web, []string{"slack.tokenSecret.existingSecret="}, "slack.tokenSecret.existingSecret is required"},
		{"slack posting nowhere", web, []string{"slack.channel=", "slack.dm=false"}, "posts nowhere"},
		{"slack bad channel", web, []string{"slack.channel=#approvals"}, "/slack/channel"},
		{"unknown web value", web, []string{"web.sessionTtl=1h"}, "additional properties"},
		{"mcp without tls", filepath.Join(chartDir, "ci", "hpa-netpol-values.yaml"), []string{"mcp.enabled=true"}, "mcp.enabled needs tls.api.enabled"},
		{"mcp in dev", filepath.Join(chartDir, "ci", "dev-values.yaml"), []string{"mcp.enabled=true"}, "set mcp.enabled: false"},
		{"mcp pending without mcp", def, []string{"mcp.pending=true"}, "mcp.pending needs mcp.enabled"},
		{"mcp on the web port", web, []string{"mcp.enabled=true", "mcp.port=7445"}, "mcp.port 7445 is already"},
		{"mcp on the admin port in dev", filepath.Join(chartDir, "ci", "dev-values.yaml"), []string{"mcp.port=9090"}, "mcp.port 9090 is already"},
		{"mcp port too high", def, []string{"mcp.port=70000"}, "/mcp/port"},
		{"mcp port zero", def, []string{"mcp.port=0"}, "/mcp/port"},
		{"mcp port a string", def, []string{"mcp.port=https"}, "/mcp/port"},
		{"mcp service type", def, []string{"mcp.service.type=ExternalName"}, "/mcp/service/type"},
		{"unknown mcp value", def, []string{"mcp.listen=:7446"}, "additional properties"},
		{"agent owner without a person", def, []string{"agentOwners={deploy-bot}"}, "/agentOwners/0"},
		{"agent owner empty agent", def, []string{"agentOwners={=alice}"}, "/agentOwners/0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderRaw(t, c.values, c.set...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("rendered, or refused for another reason (want %q): %v", c.want, err)
			}
		})
	}
}
