package controlplane

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// TestItem14_HugeIDIsLoggedShort: ids a caller sends (3.9 MB, and 900 KB,
// under the value limit) are neither logged nor echoed whole.
func TestItem14_HugeIDIsLoggedShort(t *testing.T) {
	e := newEnv(t, nil, nil)
	_, err1 := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: strings.Repeat("r", 3_900_000)})
	_, err2 := e.approvals("alice").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: "r_x/" + strings.Repeat("a", 900_000)})
	_, err3 := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: strings.Repeat("q", 900_000)})
	lines := strings.Split(e.logs.String(), "\n")
	if len(lines) < 3 {
		t.Fatalf("the refusals were not logged: %q", e.logs.String())
	}
	for _, l := range lines {
		if len(l) > 2048 {
			t.Fatalf("a log line of %d bytes: %.300s…", len(l), l)
		}
	}
	for _, err := range []error{err1, err2, err3} {
		if err == nil {
			t.Fatal("a made-up id was found")
		}
		if n := len(status.Convert(err).Message()); n > 1024 {
			t.Fatalf("the error echoes %d bytes to the client: %.200s…", n, status.Convert(err).Message())
		}
	}
	if !strings.Contains(e.logs.String(), "bytes)") {
		t.Fatalf("a cut id should say how long it was: %s", e.logs.String())
	}
}

// TestItem9_RequestValuesOverTheLimitAreRefusedNamingTheField: a value
// longer than limits.MaxValueBytes is refused where it enters, with
// InvalidArgument naming the field and the limit.
func TestItem9_RequestValuesOverTheLimitAreRefusedNamingTheField(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	big := strings.Repeat("x", 1_500_000)
	_, err := e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: "r_x/note",
		Decision: &tollgatev1.DecideRequest_TextAnswer{TextAnswer: &tollgatev1.TextAnswer{Text: big}}})
	wantTooLarge(t, err, "text_answer.text: 1500000 bytes")
	_, err = e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "s: notes.search {}\n"},
		Inputs: map[string]string{"who": big}})
	wantTooLarge(t, err, `inputs["who"]: 1500000 bytes`)
	in := map[string]string{}
	for _, k := range []string{"a", "b", "c"} {
		in[k] = strings.Repeat(k, 400_000)
	}
	_, err = e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "s: notes.search {}\n"}, Inputs: in})
	wantTooLarge(t, err, "inputs (names and values together): 1200003 bytes")
	_, err = e.approvals("alice").AttachEvidence(bg, &tollgatev1.AttachEvidenceRequest{AskId: "r_x/a",
		Artifacts: []*tollgatev1.EvidenceUpload{{Name: "a"}, {Name: "b", Content: []byte(big)}}})
	wantTooLarge(t, err, "artifacts[1].content: 1500000 bytes")
}

func wantTooLarge(t *testing.T, err error, field string) {
	t.Helper()
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, field) || !strings.Contains(msg, "1048576") {
		t.Fatalf("want InvalidArgument naming %s and the limit, got %v", field, err)
	}
}

// TestItem9_GetRunFitsTheMessageLimit: five steps each hold an output of
// about a megabyte (values within the limit) and the run, more than a
// message in all, still reads through a client with gRPC's default
// limits: the longest values are cut, each with the marker.
func TestItem9_GetRunFitsTheMessageLimit(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `ask me (text) as note:
  what should they read?
together reads:
  s1: notes.search {"q": "{note}"}
  s2: notes.search {"q": "{note}"}
  s3: notes.search {"q": "{note}"}
  s4: notes.search {"q": "{note}"}
  s5: notes.search {"q": "{note}"}
`}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	if _, err := e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: id + "/note",
		Decision: &tollgatev1.DecideRequest_TextAnswer{TextAnswer: &tollgatev1.TextAnswer{Text: strings.Repeat("n", 1_000_000)}}}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	got, err := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: id})
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	if n := proto.Size(got); n > limits.MaxMessageBytes {
		t.Fatalf("GetRun is %d bytes", n)
	}
	cut := 0
	for _, s := range got.GetRun().GetSteps() {
		for _, a := range s.GetAttempts() {
			if strings.HasSuffix(a.GetOutputJson(), " bytes)") {
				cut++
			}
		}
	}
	if got.GetRun().GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE || cut == 0 {
		t.Fatalf("run %s, %d outputs cut", got.GetRun().GetState(), cut)
	}
	// The stored run is whole: a second read cuts it the same way, and a
	// response that fits is never cut.
	again, _ := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: id})
	if !proto.Equal(got, again) {
		t.Fatal("two reads of the same run differ")
	}
}

// TestItem9_FitResponseLeavesTheOriginalAlone: responses share parts with
// caches (plan views), so cutting works on a copy.
func TestItem9_FitResponseLeavesTheOriginalAlone(t *testing.T) {
	orig := &tollgatev1.GetAskResponse{Ask: &tollgatev1.Ask{AnswerText: strings.Repeat("a", 3<<20),
		Evidence: []*tollgatev1.EvidenceArtifact{{Name: "e", Content: make([]byte, 2<<20)}}}}
	fitted, err := api.FitResponse(orig)
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(fitted); n > limits.MaxMessageBytes {
		t.Fatalf("fitted response is %d bytes", n)
	}
	if len(orig.GetAsk().GetAnswerText()) != 3<<20 || len(orig.GetAsk().GetEvidence()[0].GetContent()) != 2<<20 {
		t.Fatal("the original was changed")
	}
	a := fitted.(*tollgatev1.GetAskResponse).GetAsk()
	if !strings.HasSuffix(a.GetAnswerText(), "…(3145728 bytes)") || len(a.GetEvidence()[0].GetContent()) != 2<<20 {
		t.Fatalf("want the longest value cut first and only what it takes: answer %d bytes, evidence %d", len(a.GetAnswerText()), len(a.GetEvidence()[0].GetContent()))
	}
}
