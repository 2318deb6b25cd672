package controlplane

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/examples"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// The audit must find what it looks for: a record written around the
// engine (a terminal run with a pending ask; a side effect started with no
// consumed approval) and a journal altered after the fact.
func TestAuditFindsViolations(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	src, _ := examples.Skills.ReadFile("skills/graph-ask-demo/SKILL.md")
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	res := compiler.Compile(string(src), compiler.Options{Catalog: cat})
	b, _ := plan.Canonical(res.Plan)
	if err := e.store.PutPlan(bg, res.Digest, b); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	bad := engine.Run{ID: "bad", PlanDigest: res.Digest, Requester: "mallory", State: engine.Complete, Version: 1, CreatedAt: now, UpdatedAt: now,
		Steps: map[string]*engine.StepRun{}, Asks: map[string]*engine.AskRun{"ask_1": {ID: "ask_1", Title: "save this reading?", State: engine.AskPending, ExpiresAt: now.Add(time.Hour)}}}
	data, _ := json.Marshal(bad)
	recs := []store.JournalRecord{
		{Time: now, Actor: "system", Kind: "step.dispatched", Payload: json.RawMessage(`{"step":"save","grant":"ask_1"}`)},
		{Time: now, Actor: "x1", Kind: "step.started", Payload: json.RawMessage(`{"step":"save"}`)},
	}
	seq, head := store.Chain("bad", 0, "", recs)
	err := e.store.Commit(bg, store.Commit{Run: store.Run{ID: "bad", Version: 1, State: "complete", Requester: "mallory", PlanDigest: res.Digest,
		CreatedAt: now, UpdatedAt: now, JournalSeq: seq, JournalHead: head, Data: data},
		Asks:    []store.Ask{{ID: "bad/ask_1", RunID: "bad", Title: "save this reading?", State: "pending", Audience: "user:mallory", DueAt: now.Add(time.Hour)}},
		Journal: recs})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := e.audit("audrey").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{RunId: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	found := map[tollgatev1.Invariant]int{}
	for _, v := range inv.GetViolations() {
		found[v.GetInvariant()]++
	}
	if found[tollgatev1.Invariant_INVARIANT_OPEN_ASK_ON_TERMINAL_RUN] == 0 || found[tollgatev1.Invariant_INVARIANT_EFFECT_BEFORE_CONSUMED_APPROVAL] != 1 {
		t.Fatalf("the audit must report both: %v", inv.GetViolations())
	}
	// Issue 16: it names each query it ran with its rows.
	rows := map[string]uint64{}
	for _, q := range inv.GetQueries() {
		rows[q.GetName()+" "+q.GetLabel()] = q.GetRows()
	}
	if len(rows) != 2 || rows["questions on finished runs I3"] != uint64(found[tollgatev1.Invariant_INVARIANT_OPEN_ASK_ON_TERMINAL_RUN]) ||
		rows["side effects before their approval I1"] != 1 {
		t.Fatalf("queries and their rows: %v", inv.GetQueries())
	}
}

// Issue 16: a clean audit says what it looked for, each query with zero
// rows, not only that it found nothing.
func TestCleanAuditNamesItsQueries(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "graph-ask-demo")
	inv, err := e.audit("alice").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{RunId: r.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range inv.GetQueries() {
		if q.GetRows() != 0 || q.GetDescription() == "" || q.GetInvariant() == tollgatev1.Invariant_INVARIANT_UNSPECIFIED {
			t.Errorf("query %v", q)
		}
		names = append(names, q.GetName())
	}
	if len(inv.GetViolations()) != 0 || strings.Join(names, "; ") != "questions on finished runs; side effects before their approval" {
		t.Fatalf("queries %q, violations %v", names, inv.GetViolations())
	}
}

// Paging through a journal with the returned token visits every record
// once, in order, and ends.
func TestListJournalPages(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "graph-ask-demo")
	all := journal(t, e, r.GetId())
	var paged []uint64
	tok := ""
	for i := 0; ; i++ {
		if i > len(all) {
			t.Fatal("paging does not end")
		}
		resp, err := e.audit("alice").ListJournal(bg, &tollgatev1.ListJournalRequest{RunId: r.GetId(), PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range resp.GetRecords() {
			paged = append(paged, rec.GetSeq())
		}
		if tok = resp.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(paged) != len(all) || len(all) < 4 {
		t.Fatalf("paged %v, want the %d records", paged, len(all))
	}
	for i, s := range paged {
		if s != all[i].GetSeq() {
			t.Fatalf("paged %v", paged)
		}
	}
	if _, err := e.audit("alice").ListJournal(bg, &tollgatev1.ListJournalRequest{RunId: r.GetId(), PageToken: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad token: %v", err)
	}
}
