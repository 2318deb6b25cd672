package identity

import "testing"

func TestLoopbackAndDialOptions(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:7443": true, "localhost:1": true, "[::1]:9": true,
		"10.0.0.1:7443": false, "example.com:443": false, "nonsense": false} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v", addr, got)
		}
	}
	if _, err := DialOptions("no-port", "t"); err == nil {
		t.Fatal("an address without a port is refused")
	}
	if opts, err := DialOptions("example.com:443", "t"); err != nil || len(opts) != 3 { // credentials, token, message limits
		t.Fatalf("%v %v", opts, err)
	}
}
