package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// AtRest reports where a store holds needle at rest: the places (tables,
// files) whose stored bytes contain it, none when it is nowhere. Each
// store's tests provide one that reads what the store keeps, live rows
// and on-disk bytes as far as the store controls them.
type AtRest func(ctx context.Context, needle string) ([]string, error)

// RunErasedAtRest runs the erased-id contract: after a user's erasure no
// table of the store holds the user's id in the clear, nor, after a
// conversation's deletion, the conversation's id — a user id is often an
// email or another personal identifier, and an erasure that keeps it in a
// tombstone, a counter or a statistics row keeps who the user was. The
// tombstones still work: an exchange received before the erasure (or the
// deletion) and saved after it is dropped, and saving it leaves no id
// behind either. open returns a fresh, empty store and its AtRest.
func RunErasedAtRest(t *testing.T, open func(t *testing.T) (KnowledgeStore, AtRest)) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s KnowledgeStore, rest AtRest)
	}{
		{"ErasedUserIDLeavesTheStore", testErasedUserIDLeavesTheStore},
		{"DeletedConversationIDLeavesTheStore", testDeletedConversationIDLeavesTheStore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, rest := open(t)
			tt.run(t, s, rest)
		})
	}
}

// seedEverywhere stores for id, captured at at, what a user leaves in
// every table a store has: an exchange (messages, the conversation), a
// fact, a summary and a searchable item (the full-text index, BM25
// statistics, the revision counters).
func seedEverywhere(t *testing.T, s KnowledgeStore, id memory.Identity, at time.Time, word string) {
	t.Helper()
	seedUser(t, s, id, at, word)
	mustUpsertFact(t, s, guardedFact(id, word, at), 0)
	if err := s.SaveSummary(testCtx(t), guardedSummary(id, 1, "lives in "+word, at)); err != nil {
		t.Fatalf("SaveSummary: %v", err)
	}
	mustAddItems(t, s, guardedItem(id, "message", memory.Key(seededID(id, at), 0), "I live in "+word, vec4(1, 0, 0, 0), at))
}

// assertAtRest fails unless rest finds needle somewhere (want) or nowhere.
func assertAtRest(t *testing.T, rest AtRest, what, needle string, want bool) {
	t.Helper()
	where, err := rest(testCtx(t), needle)
	if err != nil {
		t.Fatalf("%s: scan: %v", what, err)
	}
	if want && len(where) == 0 {
		t.Fatalf("%s: %q is nowhere at rest: the scan cannot see what it checks", what, needle)
	}
	if !want && len(where) > 0 {
		t.Fatalf("%s: %q is still at rest in %v", what, needle, where)
	}
}

func testErasedUserIDLeavesTheStore(t *testing.T, s KnowledgeStore, rest AtRest) {
	ctx := testCtx(t)
	const victim, bystander = "erase-me-7f3a@example.com", "stay-here-2b9e@example.com"
	c1 := memory.Identity{Tenant: "acme", User: victim, Conversation: "c1"}
	c2 := memory.Identity{Tenant: "acme", User: victim, Conversation: "c2"}
	other := memory.Identity{Tenant: "acme", User: bystander, Conversation: "c1"}
	captured := time.Now().Add(-time.Minute)
	seedEverywhere(t, s, c1, captured, "Porto")
	seedEverywhere(t, s, c2, captured.Add(time.Second), "Braga")
	seedEverywhere(t, s, other, captured, "Lisbon")
	// A deleted conversation leaves its tombstone too.
	if err := s.DeleteConversation(ctx, c2); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	assertAtRest(t, rest, "before the erasure", victim, true)

	inflight := time.Now() // a turn received before the erasure, saved after it
	if err := s.DeleteUser(ctx, c1.Tenant, c1.User); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	assertAtRest(t, rest, "after the erasure", victim, false)
	assertAtRest(t, rest, "the bystander after the erasure", bystander, true)

	if at, err := s.ErasedAt(ctx, c1.Tenant, c1.User); err != nil || at.Before(inflight) {
		t.Fatalf("ErasedAt = %v, %v; want after %v", at, err, inflight)
	}
	if at, err := s.ErasedAt(ctx, c1.Tenant, bystander); err != nil || !at.IsZero() {
		t.Fatalf("ErasedAt of the bystander = %v, %v; want zero", at, err)
	}
	late := memory.Exchange{ID: "late", Identity: c1, At: inflight, Received: inflight,
		Turn: []memory.Message{msg(t, "user", "I live in Porto")}, Reply: msg(t, "assistant", "ok")}
	if res := mustSave(t, s, late); !res.Dropped || res.Inserted != 0 {
		t.Fatalf("turn received before the erasure, saved after it = %+v; want Dropped", res)
	}
	if _, err := s.UpsertFact(ctx, guardedFact(c1, "Porto", inflight), 0); err == nil {
		t.Fatal("guarded fact of the erased user stored")
	}
	assertAtRest(t, rest, "after the late writes", victim, false)
	if convs := mustConversations(t, s, c1.Tenant, c1.User); len(convs) != 0 {
		t.Fatalf("the erased user's conversations: %+v", convs)
	}
	assertValues(t, "the bystander's facts", mustFacts(t, s, other.Tenant, other.User, time.Now(), false), "Lisbon")
}

func testDeletedConversationIDLeavesTheStore(t *testing.T, s KnowledgeStore, rest AtRest) {
	ctx := testCtx(t)
	const conv = "conv-gone-9c1d.private@example.com"
	gone := memory.Identity{Tenant: "acme", User: "carol", Conversation: conv}
	kept := memory.Identity{Tenant: "acme", User: "carol", Conversation: "kept-5e7a"}
	captured := time.Now().Add(-time.Minute)
	seedEverywhere(t, s, gone, captured, "Porto")
	seedEverywhere(t, s, kept, captured.Add(time.Second), "Braga")
	assertAtRest(t, rest, "before the deletion", conv, true)

	inflight := time.Now()
	if err := s.DeleteConversation(ctx, gone); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	assertAtRest(t, rest, "after the deletion", conv, false)
	assertAtRest(t, rest, "the kept conversation", kept.Conversation, true)

	if at, err := s.DeletedAt(ctx, gone); err != nil || at.Before(inflight) {
		t.Fatalf("DeletedAt = %v, %v; want after %v", at, err, inflight)
	}
	late := memory.Exchange{ID: "late", Identity: gone, At: inflight, Received: inflight,
		Turn: []memory.Message{msg(t, "user", "turn in flight")}, Reply: msg(t, "assistant", "ok")}
	if res := mustSave(t, s, late); !res.Dropped || res.Inserted != 0 {
		t.Fatalf("turn received before the deletion, saved after it = %+v; want Dropped", res)
	}
	// A second deletion dates it again, still without the id.
	if err := s.DeleteConversation(ctx, gone); err == nil {
		t.Fatal("second DeleteConversation found the conversation")
	}
	assertAtRest(t, rest, "after the late turn and a second deletion", conv, false)
	if _, _, err := s.Conversation(ctx, kept); err != nil {
		t.Fatalf("the user's other conversation: %v", err)
	}
}
