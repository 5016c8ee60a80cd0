package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// pending is an index backlog entry for message i of ex, its chunks from
// chunk on waiting, its text bytes long.
func pending(ex memory.Exchange, i, chunk, bytes int) memory.PendingIndex {
	return memory.PendingIndex{Identity: ex.Identity, Key: memory.Key(ex.ID, i), Chunk: chunk, Bytes: bytes, GuardSince: ex.At}
}

// offsetAt returns p with its offset: where its chunk starts.
func offsetAt(p memory.PendingIndex, offset int) memory.PendingIndex {
	p.Offset = offset
	return p
}

func mustDeferIndex(t *testing.T, s KnowledgeStore, entries ...memory.PendingIndex) {
	t.Helper()
	if err := s.DeferIndex(testCtx(t), entries); err != nil {
		t.Fatalf("DeferIndex: %v", err)
	}
}

func mustPendingIndex(t *testing.T, s KnowledgeStore, limit, maxBytes int) []memory.PendingIndex {
	t.Helper()
	got, err := s.PendingIndex(testCtx(t), limit, maxBytes)
	if err != nil {
		t.Fatalf("PendingIndex: %v", err)
	}
	return got
}

// backlogKeys lists entries as "conversation/key@chunk", "+offset" after
// one with an offset, a "!" after one read as gone.
func backlogKeys(entries []memory.PendingIndex) []string {
	out := make([]string, len(entries))
	for i, p := range entries {
		out[i] = fmt.Sprintf("%s/%s@%d", p.Conversation, p.Key, p.Chunk)
		if p.Offset != 0 {
			out[i] += fmt.Sprintf("+%d", p.Offset)
		}
		if p.Gone {
			out[i] += "!"
		}
	}
	return out
}

func assertBacklog(t *testing.T, what string, got []memory.PendingIndex, want ...string) {
	t.Helper()
	if keys := backlogKeys(got); !slices.Equal(keys, want) {
		t.Fatalf("%s: backlog %q, want %q", what, keys, want)
	}
}

// testIndexBacklog: DeferIndex records the entries of live messages only,
// raising (never lowering) a recorded one's chunk, its offset with it
// (the highest chunk's, when one call holds a message twice); PendingIndex reads them
// in the order recorded, with their messages, at most limit and past the
// first only within maxBytes; ResolveIndex moves them on (never back) and
// removes those done, an offset moving with its chunk.
func testIndexBacklog(t *testing.T, s KnowledgeStore) {
	a := memory.Identity{Tenant: "acme", User: "alice", Conversation: "long"}
	b := memory.Identity{Tenant: "beta", User: "bob", Conversation: "long"}
	exA := exchange(a, "ex-a", 1, []memory.Message{msg(t, "user", "first of alice")},
		[]memory.Message{msg(t, "user", "second of alice")}, msg(t, "assistant", "third of alice"))
	exB := simple(t, b, 1)
	mustSave(t, s, exA)
	mustSave(t, s, exB)
	if got := mustPendingIndex(t, s, 10, 1<<20); len(got) != 0 {
		t.Fatalf("empty backlog: PendingIndex = %q", backlogKeys(got))
	}

	missing := pending(exA, 7, 0, 10) // no such message
	mustDeferIndex(t, s, offsetAt(pending(exA, 1, 3, 10), 300), offsetAt(pending(exA, 0, 2, 10), 200), missing)
	mustDeferIndex(t, s, pending(exB, 0, 1, 10))
	got := mustPendingIndex(t, s, 10, 1<<20)
	assertBacklog(t, "recorded", got, "long/ex-a:1@3+300", "long/ex-a:0@2+200", "long/"+memory.Key(exB.ID, 0)+"@1")
	for i, want := range []memory.Message{exA.Turn[0], exA.Prior[0], exB.Turn[0]} {
		p := got[i]
		if p.ID == 0 || i > 0 && p.ID <= got[i-1].ID || p.Message.Content != want.Content || p.Message.Role != want.Role ||
			p.Message.Key != p.Key || p.Bytes != 10 || p.Message.CreatedAt.IsZero() {
			t.Fatalf("entry %d = %+v, want id rising and message %q (%s)", i, p, want.Content, want.Role)
		}
	}
	if got[2].Tenant != "beta" || got[2].User != "bob" {
		t.Fatalf("entry of bob read as %s/%s", got[2].Tenant, got[2].User)
	}

	// Recorded again: the chunk rises, never falls, its offset with it;
	// the order stays.
	mustDeferIndex(t, s, offsetAt(pending(exA, 1, 1, 10), 100), offsetAt(pending(exA, 0, 5, 10), 500))
	assertBacklog(t, "recorded again", mustPendingIndex(t, s, 10, 1<<20), "long/ex-a:1@3+300", "long/ex-a:0@5+500", "long/"+memory.Key(exB.ID, 0)+"@1")

	// The bounds: limit, and bytes past the first.
	assertBacklog(t, "limit 2", mustPendingIndex(t, s, 2, 1<<20), "long/ex-a:1@3+300", "long/ex-a:0@5+500")
	assertBacklog(t, "20 bytes", mustPendingIndex(t, s, 10, 20), "long/ex-a:1@3+300", "long/ex-a:0@5+500")
	assertBacklog(t, "19 bytes", mustPendingIndex(t, s, 10, 19), "long/ex-a:1@3+300")
	assertBacklog(t, "1 byte", mustPendingIndex(t, s, 10, 1), "long/ex-a:1@3+300")

	got = mustPendingIndex(t, s, 10, 1<<20)
	got[0].Chunk, got[0].Offset, got[1].Chunk, got[1].Done = 9, 900, 0, true
	got[2].Chunk, got[2].Offset = 0, 7 // not lowered, nor its offset moved
	if err := s.ResolveIndex(testCtx(t), got); err != nil {
		t.Fatalf("ResolveIndex: %v", err)
	}
	assertBacklog(t, "resolved", mustPendingIndex(t, s, 10, 1<<20), "long/ex-a:1@9+900", "long/"+memory.Key(exB.ID, 0)+"@1")
	if err := s.ResolveIndex(testCtx(t), got); err != nil { // again: the removed one is skipped
		t.Fatalf("ResolveIndex again: %v", err)
	}
	assertBacklog(t, "resolved again", mustPendingIndex(t, s, 10, 1<<20), "long/ex-a:1@9+900", "long/"+memory.Key(exB.ID, 0)+"@1")

	// One call holding a message twice records the higher chunk's offset,
	// whichever comes first.
	mustDeferIndex(t, s, offsetAt(pending(exB, 0, 4, 10), 400), offsetAt(pending(exB, 0, 2, 10), 200))
	mustDeferIndex(t, s, offsetAt(pending(exA, 1, 10, 10), 950), offsetAt(pending(exA, 1, 12, 10), 990))
	assertBacklog(t, "twice in one call", mustPendingIndex(t, s, 10, 1<<20), "long/ex-a:1@12+990", "long/"+memory.Key(exB.ID, 0)+"@4+400")
}

// testIndexBacklogFollowsItsMessages: an entry goes with its message (the
// user erased, the conversation deleted) and reads gone once its message
// is superseded; DeferIndex records nothing of a user erased since the
// entry's guard, nor of a superseded message.
func testIndexBacklogFollowsItsMessages(t *testing.T, s KnowledgeStore) {
	kept := memory.Identity{Tenant: "acme", User: "alice", Conversation: "kept"}
	deleted := memory.Identity{Tenant: "acme", User: "alice", Conversation: "deleted"}
	erased := memory.Identity{Tenant: "acme", User: "eve", Conversation: "kept"}
	first := simple(t, kept, 1)
	mustSave(t, s, first)
	second := simple(t, kept, 2)
	mustSave(t, s, second)
	exD, exE := simple(t, deleted, 1), simple(t, erased, 1)
	mustSave(t, s, exD)
	mustSave(t, s, exE)
	mustDeferIndex(t, s, pending(first, 0, 1, 10), pending(second, 1, 1, 10), pending(exD, 0, 1, 10), pending(exE, 0, 1, 10))

	// An edit of the second question supersedes its answer.
	edit := exchange(kept, "ex-edit", 3, []memory.Message{msg(t, "user", "question 1"), msg(t, "assistant", "answer 1")},
		[]memory.Message{msg(t, "user", "question 2, edited")}, msg(t, "assistant", "answer 2, again"))
	if res := mustSave(t, s, edit); res.Superseded == 0 {
		t.Fatalf("the edit superseded nothing: %+v", res)
	}
	if err := s.DeleteConversation(testCtx(t), deleted); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	if err := s.DeleteUser(testCtx(t), erased.Tenant, erased.User); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	assertBacklog(t, "after the edit, deletion and erasure", mustPendingIndex(t, s, 10, 1<<20),
		"kept/"+memory.Key(first.ID, 0)+"@1", "kept/"+memory.Key(second.ID, 1)+"@1!")

	// Nothing recorded of a superseded message, nor of a user erased
	// since the guard; what eve says after her erasure is.
	mustDeferIndex(t, s, pending(second, 0, 1, 10))
	again := exchange(erased, "ex-again", 0, nil, []memory.Message{msg(t, "user", "hello again")}, msg(t, "assistant", "hi"))
	again.At = time.Now().Add(time.Minute)
	mustSave(t, s, again)
	before := pending(again, 0, 1, 10)
	before.GuardSince = baseTime
	mustDeferIndex(t, s, before)
	assertBacklog(t, "superseded, and guarded from before the erasure", mustPendingIndex(t, s, 10, 1<<20),
		"kept/"+memory.Key(first.ID, 0)+"@1", "kept/"+memory.Key(second.ID, 1)+"@1!")
	mustDeferIndex(t, s, pending(again, 0, 1, 10))
	assertBacklog(t, "said after the erasure", mustPendingIndex(t, s, 10, 1<<20),
		"kept/"+memory.Key(first.ID, 0)+"@1", "kept/"+memory.Key(second.ID, 1)+"@1!", "kept/"+memory.Key(again.ID, 0)+"@1")
}
