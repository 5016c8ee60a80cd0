package storetest

import (
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// RunSaveTails checks what a save reports for the engine's cache of
// conversations' newest turns (cache.Reads.Saved): every save that
// inserts messages and supersedes none, alone (a turn appended, or
// history resent) or in a group commit of several users and
// conversations, reports TailKnown with TailBefore, the user's
// Revisions.Tail just before its inserts. open must return a fresh,
// empty store for every call and register its cleanup.
func RunSaveTails(t *testing.T, open func(t *testing.T) Revisioned) {
	t.Helper()
	s := open(t)
	ctx := testCtx(t)
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	alice2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	tail := func(id memory.Identity) int64 {
		t.Helper()
		rev, err := s.ItemRevisions(ctx, id.Tenant, id.User)
		if err != nil {
			t.Fatalf("ItemRevisions: %v", err)
		}
		return rev.Tail()
	}
	check := func(step string, res memory.SaveResult, want int64) {
		t.Helper()
		if res.Inserted == 0 || res.Superseded > 0 {
			t.Fatalf("%s: the save inserted %d and superseded %d: the test wants an append", step, res.Inserted, res.Superseded)
		}
		if !res.TailKnown || res.TailBefore != want {
			t.Errorf("%s: the save reports the count before it as %d (known %v), want %d", step, res.TailBefore, res.TailKnown, want)
		}
	}
	q1, a1 := msg(t, "user", "question 1"), msg(t, "assistant", "answer 1")
	q2, a2 := msg(t, "user", "question 2"), msg(t, "assistant", "answer 2")

	before := tail(alice)
	check("a first turn", mustSave(t, s, exchange(alice, "ex1", 1, nil, []memory.Message{q1}, a1)), before)
	before = tail(alice)
	check("a turn appended", mustSave(t, s, exchange(alice, "ex2", 2, nil, []memory.Message{q2}, a2)), before)
	before = tail(alice)
	check("history resent", mustSave(t, s, exchange(alice, "ex3", 3, []memory.Message{q1, a1, q2, a2},
		[]memory.Message{msg(t, "user", "question 3")}, msg(t, "assistant", "answer 3"))), before)

	// A regeneration supersedes the last turn; the count it moved is
	// read before the next save.
	if res := mustSave(t, s, exchange(alice, "ex4", 4, []memory.Message{q1, a1, q2, a2},
		[]memory.Message{msg(t, "user", "question 3")}, msg(t, "assistant", "answer 3 again"))); res.Superseded == 0 {
		t.Fatalf("the regeneration superseded nothing: %+v", res)
	}
	before = tail(alice)
	check("a turn after a regeneration", mustSave(t, s, exchange(alice, "ex5", 5, nil,
		[]memory.Message{msg(t, "user", "question 4")}, msg(t, "assistant", "answer 4"))), before)

	// A group commit, its exchanges given out of key order: each user's
	// counts follow each other from the count before the group.
	aliceBefore, bobBefore := tail(alice), tail(bob)
	group := []memory.Exchange{
		exchange(alice2, "g1", 6, nil, []memory.Message{msg(t, "user", "other chat")}, msg(t, "assistant", "other answer")),
		exchange(bob, "g2", 7, nil, []memory.Message{msg(t, "user", "bob asks")}, msg(t, "assistant", "bob hears")),
		exchange(alice, "g3", 8, nil, []memory.Message{msg(t, "user", "question 5")}, msg(t, "assistant", "answer 5")),
	}
	res, err := s.SaveExchanges(ctx, group)
	if err != nil {
		t.Fatalf("SaveExchanges: %v", err)
	}
	check("the group's first of alice", res[0], aliceBefore)
	check("the group's bob", res[1], bobBefore)
	check("the group's second of alice", res[2], aliceBefore+int64(res[0].Inserted))
	if got, want := tail(alice), aliceBefore+int64(res[0].Inserted+res[2].Inserted); got != want {
		t.Errorf("after the group alice's count is %d, want %d", got, want)
	}
}
