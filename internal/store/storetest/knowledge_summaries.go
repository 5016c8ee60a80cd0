package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testSupersessionDropsItsSummaries covers the summaries of a branch a
// save takes off the live branch (an edit or a deletion deep in the
// history, memory.Edit; an edit or a regeneration in the window it
// resends, SavePlan.SupersedeFrom; a Rewind): the versions that cover a
// message the save supersedes go in its transaction, with their recall
// items, so the conversation's latest summary is the newest version that
// covers only messages still live (or none); a version that covers none
// stays; and the next version is the one after it, written from the live
// branch. A tool result a client trims (an edit of a result) leaves the
// summary as it was.
func testSupersessionDropsItsSummaries(t *testing.T, s KnowledgeStore) {
	for _, mode := range []string{"edit", "delete", "edit deep first", "in window", "rewind", "tool result trimmed"} {
		t.Run(mode, func(t *testing.T) {
			testSupersessionDrops(t, s, mode)
		})
	}
}

func testSupersessionDrops(t *testing.T, s KnowledgeStore, mode string) {
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice-" + strings.ReplaceAll(mode, " ", "-"), Conversation: "c1"}
	history := []memory.Message{msg(t, "user", "My name is Alice."), msg(t, "assistant", "hello Alice")}
	statement := msg(t, "user", "My phone is 555-0100 and I live in Lisbon.")
	if mode == "tool result trimmed" {
		history[1] = rawMsg(t, `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"profile","arguments":"{}"}}]}`)
		statement = rawMsg(t, `{"role":"tool","tool_call_id":"c1","content":"phone 555-0100, lives in Lisbon"}`)
	}
	ex1 := exchange(id, "e1", 1, history, []memory.Message{statement}, msg(t, "assistant", "ok"))
	mustSave(t, s, ex1)
	live := mustRecent(t, s, id, 10)
	if len(live) != 4 || live[2].Key != memory.Key("e1", 2) {
		t.Fatalf("the exchange is stored as %d messages, want 4 with the statement third", len(live))
	}
	first, said := live[0].Seq, live[2].Seq
	// v1 covers the history, v2 the statement too; each is indexed.
	v1, v2 := summary(id, 1, live[1].Seq), summary(id, 2, live[3].Seq)
	v1.Text, v2.Text = "Alice said hello.", "Alice said hello. Her phone is 555-0100; she lives in Lisbon."
	for _, v := range []memory.Summary{v1, v2} {
		if err := s.SaveSummary(ctx, v); err != nil {
			t.Fatalf("SaveSummary(version %d): %v", v.Version, err)
		}
	}
	mustAddItems(t, s, item(id, "summary", "c1:v1", v1.Text, vec4(0, 1, 0, 0)), item(id, "summary", "c1:v2", v2.Text, vec4(1, 0, 0, 0)))
	q := memory.ItemQuery{Tenant: id.Tenant, User: id.User, Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Text: "phone Lisbon", Limit: 10}
	assertRefs(t, "before the edit, the summary items found", mustSearchText(t, s, q), []string{"c1:v2"})

	edited := msg(t, "user", "I live in Porto.")
	var ex2 memory.Exchange
	stamps := memory.Stamps(ex1, 4)
	keep := 1 // the newest version left
	switch mode {
	case "tool result trimmed":
		// A client that trims its old tool results: the summary stays.
		trimmed := rawMsg(t, `{"role":"tool","tool_call_id":"c1","content":"[trimmed]"}`)
		prior := append(slices.Clone(history), trimmed, msg(t, "assistant", "ok"))
		ex2 = exchange(id, "e2", 10, prior, []memory.Message{msg(t, "user", "what now?")}, msg(t, "assistant", "anything"))
		ex2.Edits = []memory.Edit{{Seq: said, Pos: stamps[2].Pos, Digest: stamps[2].Digest, Amend: memory.Digest{1}, Supersede: true, Text: &trimmed}}
		keep = 2
	case "edit", "delete":
		// The client edits (or deletes) the statement where its requests
		// no longer store it.
		prior := append(slices.Clone(history), edited, msg(t, "assistant", "ok"))
		e := memory.Edit{Seq: said, Pos: stamps[2].Pos, Digest: stamps[2].Digest, Amend: memory.Digest{1}, Supersede: true, Text: &edited}
		if mode == "delete" {
			prior = slices.Delete(prior, 2, 3)
			e.Text = nil
		}
		ex2 = exchange(id, "e2", 10, prior, []memory.Message{msg(t, "user", "what now?")}, msg(t, "assistant", "anything"))
		ex2.Edits = []memory.Edit{e}
	case "edit deep first":
		// An edit of the first message: every version covers it.
		rename := msg(t, "user", "My name is Bob.")
		prior := append([]memory.Message{rename, history[1], statement}, msg(t, "assistant", "ok"))
		ex2 = exchange(id, "e2", 10, prior, []memory.Message{msg(t, "user", "what now?")}, msg(t, "assistant", "anything"))
		ex2.Edits = []memory.Edit{{Seq: first, Pos: stamps[0].Pos, Digest: stamps[0].Digest, Amend: memory.Digest{1}, Supersede: true, Text: &rename}}
		keep = 0
	case "in window":
		// The client edits its last message and resends the history.
		ex2 = exchange(id, "e2", 10, slices.Clone(history), []memory.Message{edited}, msg(t, "assistant", "ok"))
	case "rewind":
		ex2 = exchange(id, "e2", 10, nil, []memory.Message{edited}, msg(t, "assistant", "ok"))
		ex2.Rewind = &memory.Rewind{Seq: said, Pos: stamps[2].Pos, Digest: stamps[2].Digest}
	}
	res, err := s.SaveExchange(ctx, ex2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Superseded == 0 {
		t.Fatal("the edit superseded nothing")
	}
	got, err := s.LatestSummary(ctx, id)
	if keep == 2 {
		if err != nil {
			t.Fatalf("after the trim LatestSummary: %v, want version 2", err)
		}
		assertSummary(t, got, v2)
		assertRefs(t, "after the trim, the summary items found", mustSearchText(t, s, q), []string{"c1:v2"})
		return
	}
	switch {
	case keep == 0 && !errors.Is(err, memory.ErrNotFound):
		t.Fatalf("after the edit LatestSummary = version %d %q, %v; want memory.ErrNotFound (every version covered the edited message)",
			got.Version, got.Text, err)
	case keep == 1 && err != nil:
		t.Fatalf("after the edit LatestSummary: %v, want version 1", err)
	case keep == 1:
		assertSummary(t, got, v1)
	}
	assertRefs(t, "after the edit, the summary items found", mustSearchText(t, s, q), nil)
	q.Text = "hello"
	wantItems := []string{"c1:v1"}
	if keep == 0 {
		wantItems = nil
	}
	assertRefs(t, "after the edit, the summary items of the history found", mustSearchText(t, s, q), wantItems)
	// The next version follows the one left, written from the live branch.
	next := summary(id, keep+1, live[3].Seq+10)
	next.Text = "rewritten"
	if err := s.SaveSummary(ctx, next); err != nil {
		t.Fatalf("SaveSummary(version %d) after the edit: %v", next.Version, err)
	}
	assertSummary(t, mustLatestSummary(t, s, id), next)
}

// testLateSummaryOfSupersededBranch covers a summary version written from
// messages read before a save superseded one of them (a compaction racing
// an edit): SaveSummary refuses it with memory.ErrConflict, whatever the
// message its Through names, and stores nothing; a version whose Covers
// are all live is written.
func testLateSummaryOfSupersededBranch(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	history := []memory.Message{msg(t, "user", "My name is Alice."), msg(t, "assistant", "hello Alice")}
	statement := msg(t, "user", "My phone is 555-0100.")
	ex1 := exchange(id, "e1", 1, history, []memory.Message{statement}, msg(t, "assistant", "ok"))
	mustSave(t, s, ex1)
	live := mustRecent(t, s, id, 10)
	v1 := summary(id, 1, live[1].Seq)
	v1.Covers, v1.Through, v1.GuardSince = []string{live[0].Key, live[1].Key}, live[1].Key, ex1.At
	if err := s.SaveSummary(ctx, v1); err != nil {
		t.Fatalf("SaveSummary(version 1 of live messages): %v", err)
	}
	// A compaction reads v1 and the messages after it...
	late := summary(id, 2, live[3].Seq)
	late.Text = "Her phone is 555-0100."
	late.Covers, late.Through, late.GuardSince = []string{live[2].Key, live[3].Key}, live[3].Key, ex1.At
	// ...while the client edits the statement (its reply stays live).
	edited := msg(t, "user", "I have no phone.")
	stamps := memory.Stamps(ex1, 4)
	ex2 := exchange(id, "e2", 10, append(slices.Clone(history), edited, msg(t, "assistant", "ok")),
		[]memory.Message{msg(t, "user", "what now?")}, msg(t, "assistant", "anything"))
	ex2.Edits = []memory.Edit{{Seq: live[2].Seq, Pos: stamps[2].Pos, Digest: stamps[2].Digest, Amend: memory.Digest{1}, Supersede: true, Text: &edited}}
	res, err := s.SaveExchange(ctx, ex2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Revised) != 1 {
		t.Fatalf("the edit revised %d messages, want 1", len(res.Revised))
	}
	if err := s.SaveSummary(ctx, late); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("SaveSummary of a version covering the edited message = %v, want memory.ErrConflict", err)
	}
	assertSummary(t, mustLatestSummary(t, s, id), v1)
	unguarded := late
	unguarded.Through, unguarded.GuardSince = "", time.Time{}
	if err := s.SaveSummary(ctx, unguarded); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("SaveSummary of an unguarded version covering the edited message = %v, want memory.ErrConflict", err)
	}
	assertSummary(t, mustLatestSummary(t, s, id), v1)
	// Written again from the live branch, it is stored.
	again := late
	again.Text = "She has no phone."
	again.Covers = []string{res.Revised[0].Key, live[3].Key}
	if err := s.SaveSummary(ctx, again); err != nil {
		t.Fatalf("SaveSummary of the version written from the live branch: %v", err)
	}
	assertSummary(t, mustLatestSummary(t, s, id), again)
}
