package redisserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func needRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// A long directory gets a short socket of its own, removed by Close; Info
// and CPU read INFO.
func TestStartInfoClose(t *testing.T) {
	needRedis(t)
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Start(Config{Dir: dir, Args: []string{"--appendfsync", "everysec"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(s.Addr(), dir) || len(s.Addr()) > 100 {
		t.Fatalf("socket %s for a long directory", s.Addr())
	}
	if got, err := s.Do("CONFIG", "GET", "appendfsync"); err != nil || got != "appendfsync\neverysec" {
		t.Fatalf("Args override the defaults: %q %v", got, err)
	}
	info, err := s.Info("server")
	if err != nil || info["redis_version"] == "" {
		t.Fatalf("INFO server: %v %v", info, err)
	}
	if _, err := s.CPU(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Dir(s.Addr())); !os.IsNotExist(err) {
		t.Fatalf("the socket directory is still there: %v", err)
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("the server answers after Close")
	}
}

func TestStartNeedsDir(t *testing.T) {
	if _, err := Start(Config{}); err == nil {
		t.Fatal("Start without a directory")
	}
}

// Three masters split the slots, every node agrees on who owns which, and
// a killed node comes back into the same cluster.
func TestStartCluster(t *testing.T) {
	needRedis(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	c, err := StartCluster(ClusterConfig{Dir: t.TempDir(), Masters: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.Addrs()
	if len(addrs) != 3 || c.Len() != 3 {
		t.Fatalf("addresses %v", addrs)
	}
	owners := map[string]bool{}
	for i := range c.Len() {
		n := c.Node(i)
		if got, err := n.Do("CONFIG", "GET", "appendonly"); err != nil || got != "appendonly\nyes" {
			t.Fatalf("node %d appendonly: %q %v", i, got, err)
		}
		slots, err := n.Do("CLUSTER", "COUNTKEYSINSLOT", "0")
		if err != nil || slots != "0" {
			t.Fatalf("node %d: %q %v", i, slots, err)
		}
		// Each node owns a third of the slots: a key it does not own is
		// answered with MOVED to its owner's TCP address.
		_, err = n.Do("GET", "k")
		switch {
		case err == nil:
			owners[addrs[i]] = true
		case strings.HasPrefix(err.Error(), "MOVED "):
			owners[strings.Fields(err.Error())[2]] = true
		default:
			t.Fatalf("node %d: GET k: %v", i, err)
		}
	}
	if len(owners) != 1 {
		t.Fatalf("the nodes disagree on the owner of k: %v", owners)
	}
	view, err := c.Node(0).Do("CLUSTER", "NODES")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slotMap(view, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := slotMap(view, 4); err == nil {
		t.Fatal("slotMap counts 3 masters as 4")
	}
	c.Node(1).Kill9()
	if err := c.Wait(); err == nil {
		t.Fatal("Wait with a node down")
	}
	if err := c.Restart(1); err != nil {
		t.Fatal(err)
	}
	if err := c.whole(); err != nil {
		t.Fatal(err)
	}
}

func TestStartClusterNeedsThree(t *testing.T) {
	if _, err := StartCluster(ClusterConfig{Dir: t.TempDir(), Masters: 2}); err == nil {
		t.Fatal("a cluster of 2 masters")
	}
}
