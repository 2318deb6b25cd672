package controlplane

import (
	"regexp"
	"testing"
)

func TestTraceparent(t *testing.T) {
	w3c := regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)
	a, b := traceparent("r1", "r1/a/1"), traceparent("r1", "r1/b/1")
	if !w3c.MatchString(a) || !w3c.MatchString(b) {
		t.Fatalf("not W3C trace context: %q %q", a, b)
	}
	if a[3:35] != b[3:35] || a[36:52] == b[36:52] {
		t.Fatalf("leases of one run share the trace id and differ in span id: %q %q", a, b)
	}
	if traceparent("r2", "r2/a/1")[3:35] == a[3:35] {
		t.Fatal("runs have their own traces")
	}
}
