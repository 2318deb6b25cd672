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
