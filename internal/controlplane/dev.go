package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
)

// devConfig is who --dev mints credentials for.
type devConfig struct {
	// Users get tokens: the people of the dev policy
	// (examples/policy.csv), audrey (auditor) and otto (operator), who may
	// read every run, and mallory, who is in no policy row.
	Users []string
	// Executors get client certificates: the executor --dev starts
	// (the first), and two for executors started by hand
	// (examples/executor.yaml).
	Executors []string
	// Agents get tokens too, and are owned by a person (--agent-owner):
	// what an MCP client runs as (approvectl mcp --as alice-agent).
	Agents map[string]string
}

func defaultDev() devConfig {
	return devConfig{
		Users:     []string{"alice", "bob", "carol", "dave", "audrey", "otto", "mallory", "alice-agent"},
		Agents:    map[string]string{"alice-agent": "alice"},
		Executors: []string{"dev-executor", "edge-1", "edge-2"},
	}
}

// setUpDev sets up dev mode: loopback listeners, credentials minted in
// the dev folder, the example policy, and the embedded store. It fills in
// o's dev defaults and says on mc.Stdout what it made.
func setUpDev(mc MainConfig, o *Options, dev devConfig) (store.Store, identity.DevBundle, error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:7443"
	}
	if !identity.Loopback(o.Listen) {
		return nil, identity.DevBundle{}, fmt.Errorf("--dev listens on loopback only; %s is not", o.Listen)
	}
	// The admin listener may face a probe (a kubelet): it serves health
	// and metrics, no decision and no run. Profiles stay on loopback.
	if o.PProf && !identity.Loopback(o.AdminListen) {
		return nil, identity.DevBundle{}, fmt.Errorf("--dev serves --pprof on loopback only; %s is not", o.AdminListen)
	}
	if o.ExecutorListen == "" {
		o.ExecutorListen = "127.0.0.1:7444"
	}
	if o.WebListen == "" {
		o.WebListen = devListenBeside(o.Listen, 2)
	}
	if o.MCPListen == "" {
		o.MCPListen = devListenBeside(o.Listen, 3)
	}
	if !identity.Loopback(o.MCPListen) {
		return nil, identity.DevBundle{}, fmt.Errorf("--dev listens on loopback only; %s is not", o.MCPListen)
	}
	if !identity.Loopback(o.ExecutorListen) {
		return nil, identity.DevBundle{}, fmt.Errorf("--dev listens on loopback only; %s is not", o.ExecutorListen)
	}
	dir := filepath.Join(o.Home, "dev")
	b, err := identity.MintDev(dir, dev.Users, o.Issuer, o.Audience, 30*24*time.Hour, time.Now())
	if err != nil {
		return nil, identity.DevBundle{}, fmt.Errorf("mint dev identities: %w", err)
	}
	if o.ExecutorCert == "" {
		pki, err := identity.MintDevPKI(filepath.Join(dir, "pki"), o.TrustDomain, dev.Executors, 30*24*time.Hour, time.Now())
		if err != nil {
			return nil, identity.DevBundle{}, fmt.Errorf("mint dev certificates: %w", err)
		}
		o.ExecutorCert, o.ExecutorKey, o.ExecutorCA = pki.Server.Cert, pki.Server.Key, pki.CA
	}
	if o.EscalateTo == "" {
		o.EscalateTo = "finance"
	}
	policyNote := "edit it: reloaded within a second"
	if o.Policy == "" {
		o.Policy = filepath.Join(dir, "policy.csv")
		cur, err := os.ReadFile(o.Policy)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.WriteFile(o.Policy, examples.Policy, 0o644); err != nil {
				return nil, identity.DevBundle{}, fmt.Errorf("write dev policy: %w", err)
			}
		case err != nil:
			return nil, identity.DevBundle{}, fmt.Errorf("read dev policy: %w", err)
		case !bytes.Equal(cur, examples.Policy):
			// Kept, since it may hold the user's edits; but a copy from
			// an older release lacks rows this one's examples need.
			policyNote = "your copy, not this release's dev policy: delete it to start from that one"
		}
	}
	fmt.Fprintf(mc.Stdout, `Tollgate control plane (dev mode)
  store:   in memory — nothing survives this process
  tokens:  %s (users %s)
  policy:  %s (%s)
  certs:   %s (executors %s)
  use:     approvectl --as alice run graph-ask-demo --wait
           TOLLGATE_TOKEN=$(cat %s) approvectl asks
`, filepath.Join(dir, "tokens"), strings.Join(dev.Users, ", "), o.Policy, policyNote, filepath.Join(dir, "pki"), strings.Join(dev.Executors, ", "), b.TokenPaths["alice"])
	return memstore.New(memstore.Config{}), b, nil
}

// devExecutorTLS is the client TLS of the executor --dev starts.
func devExecutorTLS(o *Options, dev devConfig) (string, string) {
	pki := filepath.Join(o.Home, "dev", "pki")
	name := dev.Executors[0]
	return filepath.Join(pki, "executor-"+name+".pem"), filepath.Join(pki, "executor-"+name+".key")
}

// devListenBeside is where --dev serves a listener unless told: beside
// the API, offset ports up (the web inbox 7445 and MCP 7446 beside
// 127.0.0.1:7443), or a free port when the API's is (port 0: tests and
// several dev planes on one machine).
func devListenBeside(api string, offset int) string {
	host, port, err := net.SplitHostPort(api)
	if err != nil {
		return "127.0.0.1:0"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n == 0 || n+offset > 65535 {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, strconv.Itoa(n+offset))
}
