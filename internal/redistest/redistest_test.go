package redistest

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKill9KeepsWhatWasFsynced(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.URL(), "unix://") || s.Addr() == "" {
		t.Fatalf("address %q, URL %q", s.Addr(), s.URL())
	}
	if got, err := s.Do("CONFIG", "GET", "appendfsync"); err != nil || got != "appendfsync\nalways" {
		t.Fatalf("appendfsync: %q %v", got, err)
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill9()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("the server still answers after SIGKILL")
	}
	s.Restart()
	if got, err := s.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("after kill -9 and restart: %q %v", got, err)
	}
	s.Stop()
	s.Stop() // stopping twice is harmless
}

func TestVolatile(t *testing.T) {
	s := Start(t, Volatile())
	if got, err := s.Do("CONFIG", "GET", "appendonly"); err != nil || got != "appendonly\nno" {
		t.Fatalf("appendonly: %q %v", got, err)
	}
}

func TestCluster(t *testing.T) {
	s := Start(t, Cluster())
	if _, err := s.Do("EVAL", "return 1", "2", "{a}x", "{b}y"); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a cross-slot script: %v", err)
	}
	if _, err := s.Do("SET", "{a}x", "1"); err != nil {
		t.Fatal(err)
	}
	s.Kill9()
	s.Restart()
	if got, err := s.Do("GET", "{a}x"); err != nil || got != "1" {
		t.Fatalf("after a restart the cluster serves %q %v", got, err)
	}
}

// Three masters each own part of the slots: a key lives on one node and
// the others answer MOVED; a node killed and restarted rejoins with its
// data.
func TestStartCluster(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Addrs()) != 3 {
		t.Fatalf("addresses %v", c.Addrs())
	}
	owner, moved := -1, 0
	for i := range c.Len() {
		if got, err := c.Node(i).Do("CONFIG", "GET", "appendonly"); err != nil || got != "appendonly\nyes" {
			t.Fatalf("node %d appendonly: %q %v", i, got, err)
		}
		_, err := c.Node(i).Do("SET", "k", "v")
		switch {
		case err == nil:
			owner = i
		case strings.HasPrefix(err.Error(), "MOVED "):
			moved++
		default:
			t.Fatal(err)
		}
	}
	if owner < 0 || moved != 2 {
		t.Fatalf("owner %d, %d nodes answered MOVED", owner, moved)
	}
	c.Kill9(owner)
	c.Restart(owner)
	if got, err := c.Node(owner).Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("after kill -9 and restart: %q %v", got, err)
	}
}
