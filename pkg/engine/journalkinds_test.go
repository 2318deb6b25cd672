package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// storedKinds pins every kind's value, by family: journals and runs
// already written hold these strings (and a journal's hash chain covers
// them), so a change here is a change of stored format, not a rename.
func storedKinds() map[string]map[string]string {
	return map[string]map[string]string{
		"JournalKind": {
			"JournalRunStarted": "run.started", "JournalRunState": "run.state", "JournalRunCancel": "run.cancel",
			"JournalRunFinish": "run.finish", "JournalRunEnded": "run.ended",
			"JournalStepDispatched": "step.dispatched", "JournalStepLeased": "step.leased", "JournalStepStarted": "step.started",
			"JournalStepSucceeded": "step.succeeded", "JournalStepFailed": "step.failed", "JournalStepLeaseLost": "step.lease_lost", "JournalStepLeaseMoved": "step.lease_moved",
			"JournalStepResultAfterEnd": "step.result_after_end", "JournalStepCancelled": "step.cancelled",
			"JournalStepBlocked": "step.blocked", "JournalStepReprepare": "step.reprepare", "JournalStepRecorded": "step.recorded",
			"JournalJoinHeld": "join.held", "JournalJoinFailed": "join.failed",
			"JournalAskOpened": "ask.opened", "JournalAskFacts": "ask.facts", "JournalAskReminded": "ask.reminded",
			"JournalAskEscalated": "ask.escalated", "JournalAskQuorumRaised": "ask.quorum_raised", "JournalAskVoted": "ask.voted",
			"JournalAskAmended": "ask.amended", "JournalAskEvidenceRequested": "ask.evidence_requested",
			"JournalAskEvidenceAttached": "ask.evidence_attached", "JournalAskDelegated": "ask.delegated",
			"JournalAskReply": "ask.reply", "JournalAskDecided": "ask.decided", "JournalAskExpired": "ask.expired",
			"JournalAskStale": "ask.stale", "JournalAskClosed": "ask.closed",
			"JournalApprovalConsumed": "approval.consumed", "JournalApprovalReused": "approval.reused",
			"JournalApprovalRevoked": "approval.revoked", "JournalApprovalFresh": "approval.fresh",
			"JournalNoticeDelivery": "notice.delivery",
		},
		"DecisionKind": {
			"DecisionApprove": "approve", "DecisionReject": "reject", "DecisionAnswer": "answer", "DecisionAmend": "amend",
			"DecisionRevoke": "revoke", "DecisionRequestEvidence": "request_evidence", "DecisionEvidence": "evidence",
			"DecisionDelegate": "delegate", "DecisionEscalate": "escalate", "DecisionExpire": "expire", "DecisionStale": "stale",
			"DecisionCancel": "cancel",
		},
		"NoticeKind": {
			"NoticeReminder": "reminder", "NoticeEscalated": "escalated", "NoticeEvidenceRequested": "evidence_requested",
			"NoticeEvidenceAttached": "evidence_attached", "NoticeDelegated": "delegated",
		},
	}
}

// declaredKinds reads the package's own source: each family's constants
// (type name → constant → value) and whether each has a comment.
func declaredKinds(t *testing.T) (map[string]map[string]string, []string) {
	t.Helper()
	fset := token.NewFileSet()
	families := storedKinds()
	out := map[string]map[string]string{}
	var undocumented []string
	for _, name := range []string{"journalkinds.go", "askkinds.go"} {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				typ, ok := vs.Type.(*ast.Ident)
				if !ok || families[typ.Name] == nil {
					continue
				}
				for i, id := range vs.Names {
					v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
					if err != nil {
						t.Fatal(err)
					}
					if out[typ.Name] == nil {
						out[typ.Name] = map[string]string{}
					}
					out[typ.Name][id.Name] = v
					if vs.Doc == nil && vs.Comment == nil {
						undocumented = append(undocumented, id.Name)
					}
				}
			}
		}
	}
	return out, undocumented
}

func TestKindsArePinnedUniqueAndDocumented(t *testing.T) {
	got, undocumented := declaredKinds(t)
	for family, want := range storedKinds() {
		for _, name := range slices.Sorted(maps.Keys(want)) {
			if v, ok := got[family][name]; !ok || v != want[name] {
				t.Errorf("%s %s is %q, was %q: a released value is stored and never changes", family, name, v, want[name])
			}
		}
		for _, name := range slices.Sorted(maps.Keys(got[family])) {
			if _, ok := want[name]; !ok {
				t.Errorf("%s %s = %q is not pinned here: add it to storedKinds", family, name, got[family][name])
			}
		}
		seen := map[string]string{}
		for name, v := range got[family] {
			if other, dup := seen[v]; dup {
				t.Errorf("%s: %s and %s are both %q", family, name, other, v)
			}
			seen[v] = name
		}
	}
	for v := range maps.Values(got["JournalKind"]) {
		if family, _, _ := strings.Cut(v, "."); !slices.Contains([]string{"run", "step", "join", "ask", "approval", "notice"}, family) {
			t.Errorf("journal kind %q is in no family", v)
		}
	}
	if len(undocumented) > 0 {
		t.Errorf("kinds without a comment saying what they record: %v", undocumented)
	}
}

// TestNoBareKinds keeps the vocabulary in its two files: no other file of
// the package names a journal kind as a string, records or compares a
// kind given as a literal, or builds a Decision or AskNotice with one.
func TestNoBareKinds(t *testing.T) {
	kinds, _ := declaredKinds(t)
	journal := map[string]bool{}
	for v := range maps.Values(kinds["JournalKind"]) {
		journal[v] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if name == "journalkinds.go" || name == "askkinds.go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		lit := func(e ast.Expr) (string, bool) {
			b, ok := e.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return "", false
			}
			s, _ := strconv.Unquote(b.Value)
			return s, true
		}
		kindField := func(e ast.Expr) bool {
			sel, ok := e.(*ast.SelectorExpr)
			return ok && sel.Sel.Name == "Kind"
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, ok := lit(n); ok && journal[s] {
					t.Errorf("%s: journal kind %q as a string; use its constant", fset.Position(n.Pos()), s)
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "record" && len(n.Args) > 0 {
					if s, ok := lit(n.Args[0]); ok {
						t.Errorf("%s: t.record(%q, …); use a JournalKind constant", fset.Position(n.Pos()), s)
					}
				}
			case *ast.CompositeLit:
				id, ok := n.Type.(*ast.Ident)
				if !ok || (id.Name != "Decision" && id.Name != "AskNotice" && id.Name != "Record" && id.Name != "Note") {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Kind" {
						if s, ok := lit(kv.Value); ok {
							t.Errorf("%s: %s{Kind: %q}; use its constant", fset.Position(kv.Pos()), id.Name, s)
						}
					}
				}
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					return true
				}
				for _, pair := range [][2]ast.Expr{{n.X, n.Y}, {n.Y, n.X}} {
					if s, ok := lit(pair[1]); ok && kindField(pair[0]) {
						t.Errorf("%s: .Kind compared with %q; use its constant", fset.Position(n.Pos()), s)
					}
				}
			}
			return true
		})
	}
}
