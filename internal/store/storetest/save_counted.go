package storetest

import (
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// RunSavesCountMessages checks that every save moves the user's
// messages_added (read by added) by the messages it inserted, and no other
// user's: this release no longer reads the counter, but gateways of
// earlier ones sharing the database key their cache of a conversation's
// newest turns by it. It covers a turn appended, history resent, a
// regeneration and a group commit of several users and conversations.
// open must return a fresh, empty store for every call and register its
// cleanup.
func RunSavesCountMessages(t *testing.T, open func(t *testing.T) (s CaptureStore, added func(tenant, user string) int64)) {
	t.Helper()
	s, added := open(t)
	ctx := testCtx(t)
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	alice2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	aliceAt, bobAt := added("acme", "alice"), added("acme", "bob")
	check := func(step string, inserted int) {
		t.Helper()
		if inserted == 0 {
			t.Fatalf("%s: the save inserted nothing", step)
		}
		if got, want := added("acme", "alice"), aliceAt+int64(inserted); got != want {
			t.Errorf("%s: alice's messages_added is %d, want %d", step, got, want)
		}
		if got := added("acme", "bob"); got != bobAt {
			t.Errorf("%s: bob's messages_added moved from %d to %d", step, bobAt, got)
		}
		aliceAt = added("acme", "alice")
	}
	q1, a1 := msg(t, "user", "question 1"), msg(t, "assistant", "answer 1")
	q2, a2 := msg(t, "user", "question 2"), msg(t, "assistant", "answer 2")
	check("a first turn", mustSave(t, s, exchange(alice, "ex1", 1, nil, []memory.Message{q1}, a1)).Inserted)
	check("a turn appended", mustSave(t, s, exchange(alice, "ex2", 2, nil, []memory.Message{q2}, a2)).Inserted)
	check("history resent", mustSave(t, s, exchange(alice, "ex3", 3, []memory.Message{q1, a1, q2, a2},
		[]memory.Message{msg(t, "user", "question 3")}, msg(t, "assistant", "answer 3"))).Inserted)
	res := mustSave(t, s, exchange(alice, "ex4", 4, []memory.Message{q1, a1, q2, a2},
		[]memory.Message{msg(t, "user", "question 3")}, msg(t, "assistant", "answer 3 again")))
	if res.Superseded == 0 {
		t.Fatalf("the regeneration superseded nothing: %+v", res)
	}
	check("a regeneration", res.Inserted)

	// A group commit, its exchanges given out of key order.
	group := []memory.Exchange{
		exchange(alice2, "g1", 6, nil, []memory.Message{msg(t, "user", "other chat")}, msg(t, "assistant", "other answer")),
		exchange(bob, "g2", 7, nil, []memory.Message{msg(t, "user", "bob asks")}, msg(t, "assistant", "bob hears")),
		exchange(alice, "g3", 8, nil, []memory.Message{msg(t, "user", "question 5")}, msg(t, "assistant", "answer 5")),
	}
	results, err := s.SaveExchanges(ctx, group)
	if err != nil {
		t.Fatalf("SaveExchanges: %v", err)
	}
	bobAt += int64(results[1].Inserted)
	check("a group commit", results[0].Inserted+results[2].Inserted)
}
