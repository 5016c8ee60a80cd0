package prompt

import (
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestForgetDropsWhatTheAssemblerKeepsOfTheUser: the recalled blocks and
// the summaries an Assembler keeps per conversation hold what was recalled
// and summarised of the user; their erasure (or the deletion of one of
// their conversations) drops every conversation of theirs, another user's
// staying, and a request whose parts loaded before it keeps nothing.
func TestForgetDropsWhatTheAssemblerKeepsOfTheUser(t *testing.T) {
	a := &Assembler{kept: newKeptBlocks(16, 4), held: newHeldSummaries(16)}
	rev := &memory.Revisions{Messages: 3, Changed: 2}
	q := memory.Message{Role: "user", Content: "where do I live?"}
	sum := &memory.Summary{Conversation: "c1", Version: 1, Text: "Alice moved to 12 Rua Augusta."}
	alice1 := memory.Identity{Tenant: "t", User: "alice", Conversation: "c1"}
	alice2 := memory.Identity{Tenant: "t", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "t", User: "bob", Conversation: "c1"}
	for _, id := range []memory.Identity{alice1, alice2, bob} {
		kept, held := a.epochs()
		a.kept.put(id, rev, kept, q, "Recalled: Alice lives at 12 Rua Augusta.")
		a.held.put(id, rev, held, sum)
	}
	keptEpoch, heldEpoch := a.epochs() // a request's parts load
	a.Forget("t", "alice")
	for _, id := range []memory.Identity{alice1, alice2} {
		if a.kept.convs.Contains(id) || a.held.convs.Contains(id) {
			t.Fatalf("%s/%s: kept after the user was forgotten", id.User, id.Conversation)
		}
	}
	if !a.kept.convs.Contains(bob) || !a.held.convs.Contains(bob) {
		t.Fatal("another user's were dropped")
	}
	// The request that loaded before the forget ends after it.
	a.kept.put(alice1, rev, keptEpoch, q, "Recalled: Alice lives at 12 Rua Augusta.")
	a.held.put(alice1, rev, heldEpoch, sum)
	if a.kept.convs.Contains(alice1) || a.held.convs.Contains(alice1) {
		t.Fatal("a request whose parts loaded before the forget kept them after it")
	}
	a.Clear()
	if a.kept.convs.Len()+a.held.convs.Len() != 0 {
		t.Fatal("Clear left entries")
	}
}

// TestAnotherUsersForgetKeepsWhatARequestLoaded: a request whose parts
// loaded before another user's forget (an erasure, a deletion of a
// conversation, even of one that does not exist) keeps its blocks and
// summary: one tenant's deletions do not stop the others' prompts from
// repeating what they were shown.
func TestAnotherUsersForgetKeepsWhatARequestLoaded(t *testing.T) {
	a := &Assembler{kept: newKeptBlocks(16, 4), held: newHeldSummaries(16)}
	rev := &memory.Revisions{Messages: 3, Changed: 2}
	q := memory.Message{Role: "user", Content: "where do I live?"}
	bob := memory.Identity{Tenant: "t", User: "bob", Conversation: "c1"}
	sum := &memory.Summary{Conversation: "c1", Version: 1, Text: "Bob lives in Porto."}
	keptEpoch, heldEpoch := a.epochs()
	a.Forget("other", "alice")
	a.kept.put(bob, rev, keptEpoch, q, "Recalled: Bob lives in Porto.")
	a.held.put(bob, rev, heldEpoch, sum)
	if !a.kept.convs.Contains(bob) || !a.held.convs.Contains(bob) {
		t.Fatal("bob's request kept nothing for another tenant's user's forget")
	}
}
