package jaegerserver

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// Start, Services and Stop outside a test's helpers: an empty Jaeger
// holds no service; Stop twice is harmless.
func TestStartServicesStop(t *testing.T) {
	bin, err := Binary()
	if errors.Is(err, ErrNoBinary) && os.Getenv("CI") != "true" {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	j, err := Start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	svcs, err := j.Services(context.Background())
	if err != nil || len(svcs) != 0 {
		t.Fatalf("services %v, %v", svcs, err)
	}
	j.Stop()
	j.Stop()
	if !j.Exited() {
		t.Fatal("jaeger still runs after Stop")
	}
}

// TestDecode reads a canned v1 API answer: a trace id whose high half is
// zero (which Jaeger prints as 16 digits), numbers and strings as tag
// values, a per-span process, and spans out of start order.
func TestDecode(t *testing.T) {
	body := `{"data":[{"traceID":"c0ffee00000001","spans":[
	  {"traceID":"c0ffee00000001","spanID":"2","operationName":"child","references":[{"refType":"CHILD_OF","traceID":"000000000000000000c0ffee00000001","spanID":"0000000000000001"}],
	   "startTime":1700000000000002,"duration":5,"tags":[{"key":"n","type":"int64","value":9007199254740993},{"key":"s","type":"string","value":"42"},{"key":"b","type":"bool","value":true},{"key":"f","type":"float64","value":1.25}],"processID":"p1"},
	  {"traceID":"c0ffee00000001","spanID":"0000000000000001","operationName":"root","references":[],"startTime":1700000000000001,"duration":10,"tags":[],"processID":"p2","process":{"serviceName":"inline"}}
	 ],"processes":{"p1":{"serviceName":"svc","tags":[]}}}],"total":0,"limit":0,"offset":0,"errors":null}`
	trs, err := decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 1 {
		t.Fatalf("%d traces", len(trs))
	}
	tr := trs[0]
	if tr.ID != "000000000000000000c0ffee00000001" || len(tr.Spans) != 2 {
		t.Fatalf("trace %s with %d spans", tr.ID, len(tr.Spans))
	}
	root, child := tr.Spans[0], tr.Spans[1]
	if root.Operation != "root" || root.Service != "inline" || root.ParentSpanID != "" || root.Duration != 10*time.Microsecond {
		t.Errorf("root %+v", root)
	}
	if child.SpanID != "0000000000000002" || child.ParentSpanID != root.SpanID || child.Service != "svc" || child.TraceID != tr.ID {
		t.Errorf("child %+v", child)
	}
	if !child.Start.Equal(time.UnixMicro(1700000000000002)) {
		t.Errorf("start %v", child.Start)
	}
	for k, want := range map[string]string{"n": "9007199254740993", "s": "42", "b": "true", "f": "1.25"} {
		if got := child.Tag(k); got != want {
			t.Errorf("tag %s = %q, want %q", k, got, want)
		}
	}
	if kids := tr.Children(root); len(kids) != 1 || kids[0].SpanID != child.SpanID {
		t.Errorf("children %v", kids)
	}
	if _, err := decode([]byte(`{"data":null,"errors":[{"code":400,"msg":"bad"}]}`)); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("an error answer decodes with %v", err)
	}
}
