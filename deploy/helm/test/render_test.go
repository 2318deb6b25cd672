package charttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, relative to this module.
const (
	chartDir  = "../tollgate"
	namespace = "tollgate"
	release   = "t"
)

// valueSets are the chart's CI value sets (ci/*.yaml), the ones CI lints.
func valueSets(t *testing.T) []string {
	t.Helper()
	sets, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil || len(sets) < 4 {
		t.Fatalf("want at least four value sets in %s/ci, have %v (%v)", chartDir, sets, err)
	}
	return sets
}

// helm is the pinned Helm: $TOLLGATE_HELM, else the repository's bin/helm
// (make helm). Without it the test skips, and fails under CI=true.
func helm(t *testing.T) string {
	t.Helper()
	p := os.Getenv("TOLLGATE_HELM")
	if p == "" {
		p, _ = filepath.Abs("../../../bin/helm")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Helm at %s: CI builds it with `make helm` (tools/helm)", p)
		}
		t.Skipf("no Helm at %s: `make helm` builds it (or set TOLLGATE_HELM)", p)
	}
	return p
}

// render runs helm template on the chart with a value set and more
// --set arguments ("file:KEY=PATH" is a --set-file), and decodes every
// document strictly.
func render(t *testing.T, valuesFile string, set ...string) *manifest {
	t.Helper()
	out, err := renderRaw(t, valuesFile, set...)
	if err != nil {
		t.Fatalf("helm template -f %s %v: %v", valuesFile, set, err)
	}
	m, err := decode(out)
	if err != nil {
		t.Fatalf("%s: %v", valuesFile, err)
	}
	m.values = mergedValues(t, valuesFile)
	return m
}

func renderRaw(t *testing.T, valuesFile string, set ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace}
	if valuesFile != "" {
		args = append(args, "-f", valuesFile)
	}
	for _, s := range set {
		if f, ok := strings.CutPrefix(s, "file:"); ok {
			args = append(args, "--set-file", f)
			continue
		}
		args = append(args, "--set", s)
	}
	home := t.TempDir()
	cmd := exec.Command(helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// certificate is cert-manager's Certificate, the fields the chart uses
// (no Go module of cert-manager here; unknown fields are refused all the same).
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string   `json:"secretName"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		Usages      []string `json:"usages"`
		DNSNames    []string `json:"dnsNames"`
		URIs        []string `json:"uris"`
		CommonName  string   `json:"commonName"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// serviceMonitor is prometheus-operator's ServiceMonitor, as the chart writes it.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// manifest is one rendering, by kind.
type manifest struct {
	values       map[string]any
	deployments  []appsv1.Deployment
	daemonSets   []appsv1.DaemonSet
	services     []corev1.Service
	configMaps   []corev1.ConfigMap
	secrets      []corev1.Secret
	accounts     []corev1.ServiceAccount
	pdbs         []policyv1.PodDisruptionBudget
	hpas         []autoscalingv2.HorizontalPodAutoscaler
	netpols      []networkingv1.NetworkPolicy
	ingresses    []networkingv1.Ingress
	certificates []certificate
	monitors     []serviceMonitor
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits a rendering into documents and decodes each strictly into
// its type: a field the type does not have, or a kind the chart should not
// render, is an error.
func decode(out []byte) (*manifest, error) {
	m := &manifest{}
	for _, doc := range docSep.Split(string(out), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("a document is not YAML: %w\n%s", err, doc)
		}
		var into any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			m.deployments = append(m.deployments, appsv1.Deployment{})
			into = &m.deployments[len(m.deployments)-1]
		case "apps/v1 DaemonSet":
			m.daemonSets = append(m.daemonSets, appsv1.DaemonSet{})
			into = &m.daemonSets[len(m.daemonSets)-1]
		case "v1 Service":
			m.services = append(m.services, corev1.Service{})
			into = &m.services[len(m.services)-1]
		case "v1 ConfigMap":
			m.configMaps = append(m.configMaps, corev1.ConfigMap{})
			into = &m.configMaps[len(m.configMaps)-1]
		case "v1 Secret":
			m.secrets = append(m.secrets, corev1.Secret{})
			into = &m.secrets[len(m.secrets)-1]
		case "v1 ServiceAccount":
			m.accounts = append(m.accounts, corev1.ServiceAccount{})
			into = &m.accounts[len(m.accounts)-1]
		case "policy/v1 PodDisruptionBudget":
			m.pdbs = append(m.pdbs, policyv1.PodDisruptionBudget{})
			into = &m.pdbs[len(m.pdbs)-1]
		case "autoscaling/v2 HorizontalPodAutoscaler":
			m.hpas = append(m.hpas, autoscalingv2.HorizontalPodAutoscaler{})
			into = &m.hpas[len(m.hpas)-1]
		case "networking.k8s.io/v1 NetworkPolicy":
			m.netpols = append(m.netpols, networkingv1.NetworkPolicy{})
			into = &m.netpols[len(m.netpols)-1]
		case "networking.k8s.io/v1 Ingress":
			m.ingresses = append(m.ingresses, networkingv1.Ingress{})
			into = &m.ingresses[len(m.ingresses)-1]
		case "cert-manager.io/v1 Certificate":
			m.certificates = append(m.certificates, certificate{})
			into = &m.certificates[len(m.certificates)-1]
		case "monitoring.coreos.com/v1 ServiceMonitor":
			m.monitors = append(m.monitors, serviceMonitor{})
			into = &m.monitors[len(m.monitors)-1]
		default:
			return nil, fmt.Errorf("the chart renders a %s %s this test does not know: add it here, with its checks", tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", tm.Kind, err, doc)
		}
	}
	return m, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// pod is one pod template of the rendering, with what it belongs to.
type pod struct {
	owner    string // Kind/name
	replicas int    // the least number of pods (a DaemonSet: 1)
	meta     metav1.ObjectMeta
	spec     corev1.PodSpec
}

func (m *manifest) pods() []pod {
	var ps []pod
	for _, d := range m.deployments {
		n := 1
		if d.Spec.Replicas != nil {
			n = int(*d.Spec.Replicas)
		}
		for _, h := range m.hpas {
			if h.Spec.ScaleTargetRef.Kind == "Deployment" && h.Spec.ScaleTargetRef.Name == d.Name && h.Spec.MinReplicas != nil {
				n = int(*h.Spec.MinReplicas)
			}
		}
		ps = append(ps, pod{owner: "Deployment/" + d.Name, replicas: n, meta: d.Spec.Template.ObjectMeta, spec: d.Spec.Template.Spec})
	}
	for _, d := range m.daemonSets {
		ps = append(ps, pod{owner: "DaemonSet/" + d.Name, replicas: 1, meta: d.Spec.Template.ObjectMeta, spec: d.Spec.Template.Spec})
	}
	return ps
}

// podWith is the pod whose container is named name; nil if none.
func (m *manifest) podWith(container string) *pod {
	for _, p := range m.pods() {
		for _, c := range p.spec.Containers {
			if c.Name == container {
				return &p
			}
		}
	}
	return nil
}

func (m *manifest) configMap(name string) *corev1.ConfigMap {
	for i := range m.configMaps {
		if m.configMaps[i].Name == name {
			return &m.configMaps[i]
		}
	}
	return nil
}

func (m *manifest) service(name string) *corev1.Service {
	for i := range m.services {
		if m.services[i].Name == name {
			return &m.services[i]
		}
	}
	return nil
}

// mergedValues is the chart's values.yaml with the value set over it, as
// Helm merges them (maps deeply, everything else replaced).
func mergedValues(t *testing.T, valuesFile string) map[string]any {
	t.Helper()
	read := func(p string) map[string]any {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return v
	}
	base := read(filepath.Join(chartDir, "values.yaml"))
	if valuesFile != "" {
		merge(base, read(valuesFile))
	}
	return base
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// externalNames are the values at keys existingSecret / existingConfigMap:
// the Secrets and ConfigMaps an operator creates, by the value path that
// names each.
func externalNames(values map[string]any) map[string][]string {
	out := map[string][]string{}
	var walk func(prefix string, v map[string]any)
	walk = func(prefix string, v map[string]any) {
		for k, x := range v {
			path := strings.TrimPrefix(prefix+"."+k, ".")
			switch x := x.(type) {
			case map[string]any:
				walk(path, x)
			case string:
				if (k == "existingSecret" || k == "existingConfigMap") && x != "" {
					out[x] = append(out[x], path)
				}
			}
		}
	}
	walk("", values)
	for _, paths := range out {
		slices.Sort(paths)
	}
	return out
}
