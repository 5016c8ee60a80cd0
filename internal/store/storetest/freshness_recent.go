package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// headReader is a store that reads the prints of a conversation's first
// live messages (through the engine's cache: Cached).
type headReader interface {
	Head(ctx context.Context, id memory.Identity, n int) ([]memory.Print, error)
	MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error)
}

// groupSaver is a store that stores several exchanges in one transaction.
type groupSaver interface {
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
}

// testRecentSeesEveryChange keeps asking one store for a conversation's
// newest messages, and the prints of its first ones (Head; a store may
// keep both in memory) while both stores and
// plain SQL change them: saves through either store, a regeneration that
// supersedes some through each, an edit and a delete in SQL, a group
// commit of several users and conversations, a deleted conversation, the
// user's erasure, and the same exchanges stored again after it. Every
// answer follows the change before it, for several n, and is the caller's
// to change.
func testRecentSeesEveryChange(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	alice2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	at := time.Now().Add(-time.Hour)
	msg := func(role, text string) memory.Message {
		return memory.Message{Role: role, Content: text, Raw: []byte(fmt.Sprintf(`{"role":%q,"content":%q}`, role, text))}
	}
	exchange := func(id memory.Identity, exID string, prior []memory.Message, q, a string) memory.Exchange {
		at = at.Add(time.Second)
		return memory.Exchange{ID: exID, Identity: id, Model: "m", At: at, Prior: prior,
			Turn: []memory.Message{msg("user", q)}, Reply: msg("assistant", a)}
	}
	save := func(st Store, id memory.Identity, exID string, prior []memory.Message, q, a string) {
		t.Helper()
		if res, err := st.SaveExchange(ctx, exchange(id, exID, prior, q, a)); err != nil || res.Dropped || res.Duplicate {
			t.Fatalf("save %s: %+v, %v", exID, res, err)
		}
	}
	saveGroup := func(exs []memory.Exchange) {
		t.Helper()
		gs, ok := r.Mine.(groupSaver)
		if !ok {
			for _, ex := range exs {
				if _, err := r.Mine.SaveExchange(ctx, ex); err != nil {
					t.Fatalf("save %s: %v", ex.ID, err)
				}
			}
			return
		}
		if _, err := gs.SaveExchanges(ctx, exs); err != nil {
			t.Fatalf("save group: %v", err)
		}
	}
	recent := func(ctx context.Context, step string, id memory.Identity, n int) []string {
		t.Helper()
		got, err := r.Mine.Recent(ctx, id, n)
		if err != nil {
			t.Fatalf("%s: Recent(%s, %d): %v", step, id.Conversation, n, err)
		}
		out := []string{}
		for _, m := range got {
			if m.Tenant != id.Tenant || m.User != id.User || m.Conversation != id.Conversation {
				t.Fatalf("%s: Recent(%s/%s/%s) returned a message of %s/%s/%s", step,
					id.Tenant, id.User, id.Conversation, m.Tenant, m.User, m.Conversation)
			}
			out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Content))
		}
		// The slice and its messages are the caller's: changing them
		// changes no later answer.
		for i := range got {
			got[i].Content, got[i].Seq = "changed by the caller", -1
		}
		return out
	}
	// head checks that the cache's prints of the conversation's first n
	// live messages (routing's Head) are those of the store's.
	head := func(step string, id memory.Identity, n int) {
		t.Helper()
		h, ok := r.Mine.(headReader)
		if !ok {
			return
		}
		got, err := h.Head(ctx, id, n)
		if err != nil {
			t.Fatalf("%s: Head(%s, %d): %v", step, id.Conversation, n, err)
		}
		msgs, err := h.MessagesAfter(ctx, id, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		exp := make([]memory.Print, len(msgs))
		for i, m := range msgs {
			exp[i] = m.Print()
		}
		if !slices.Equal(got, exp) {
			t.Fatalf("%s: Head(%s/%s, %d) holds %d prints, not those of the %d first live messages", step, id.User, id.Conversation, n, len(got), len(exp))
		}
	}
	want := func(step string, id memory.Identity, w ...string) {
		t.Helper()
		for range 2 { // the second answers may come from memory
			for _, n := range []int{1, 2, 3, 100} {
				exp := w[max(0, len(w)-n):]
				if got := recent(ctx, step, id, n); !slices.Equal(got, exp) {
					t.Fatalf("%s: Recent(%s/%s, %d) = %q, want %q", step, id.User, id.Conversation, n, got, exp)
				}
				head(step, id, n)
			}
		}
	}
	want("empty", alice)
	for n := 1; n <= 2; n++ {
		save(r.Mine, alice, fmt.Sprintf("ex%d", n), nil, fmt.Sprintf("q%d", n), fmt.Sprintf("a%d", n))
	}
	want("stored", alice, "1:q1", "2:a1", "3:q2", "4:a2")
	save(r.Mine, alice, "ex3", nil, "q3", "a3")
	want("after a save through it", alice, "1:q1", "2:a1", "3:q2", "4:a2", "5:q3", "6:a3")
	save(r.Other, alice, "ex4", nil, "q4", "a4")
	want("after the other store's save", alice, "1:q1", "2:a1", "3:q2", "4:a2", "5:q3", "6:a3", "7:q4", "8:a4")
	save(r.Mine, alice, "regen1", []memory.Message{msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2"), msg("assistant", "a2")},
		"q3 edited", "a3 again")
	want("after its regeneration", alice, "1:q1", "2:a1", "3:q2", "4:a2", "9:q3 edited", "10:a3 again")
	save(r.Other, alice, "regen2", []memory.Message{msg("user", "q1"), msg("assistant", "a1")}, "q2 edited", "a2 again")
	want("after the other store's regeneration", alice, "1:q1", "2:a1", "11:q2 edited", "12:a2 again")
	must(t, r.Exec(ctx, `UPDATE messages SET content = 'a1 edited' WHERE tenant = 'acme' AND user_id = 'alice' AND key = '`+memory.Key("ex1", 1)+`'`))
	want("after an edit in SQL", alice, "1:q1", "2:a1 edited", "11:q2 edited", "12:a2 again")
	must(t, r.Exec(ctx, `DELETE FROM messages WHERE tenant = 'acme' AND user_id = 'alice' AND key = '`+memory.Key("ex1", 0)+`'`))
	want("after a delete in SQL", alice, "2:a1 edited", "11:q2 edited", "12:a2 again")

	// Group commits of two users and two conversations of one of them, the
	// second with a regeneration.
	want("bob empty", bob)
	want("c2 empty", alice2)
	save(r.Mine, alice2, "c2-ex1", nil, "c2 q1", "c2 a1")
	want("c2 stored", alice2, "1:c2 q1", "2:c2 a1")
	group := []memory.Exchange{
		exchange(alice, "g1", nil, "g1 q", "g1 a"),
		exchange(bob, "g2", nil, "bob q", "bob a"),
		exchange(alice2, "g3", nil, "c2 q2", "c2 a2"),
		exchange(alice, "g4", nil, "g4 q", "g4 a"),
	}
	saveGroup(group)
	want("after a group commit", alice, "2:a1 edited", "11:q2 edited", "12:a2 again", "13:g1 q", "14:g1 a", "15:g4 q", "16:g4 a")
	want("bob after a group commit", bob, "1:bob q", "2:bob a")
	want("c2 after a group commit", alice2, "1:c2 q1", "2:c2 a1", "3:c2 q2", "4:c2 a2")
	regroup := []memory.Exchange{
		exchange(alice2, "g5", []memory.Message{msg("user", "c2 q1"), msg("assistant", "c2 a1")}, "c2 q2 edited", "c2 a2 again"),
		exchange(bob, "g6", nil, "bob q2", "bob a2"),
	}
	saveGroup(regroup)
	want("c2 after a group commit's regeneration", alice2, "1:c2 q1", "2:c2 a1", "5:c2 q2 edited", "6:c2 a2 again")
	want("bob after a second group commit", bob, "1:bob q", "2:bob a", "3:bob q2", "4:bob a2")

	must(t, r.Other.DeleteConversation(ctx, alice2))
	want("after the other store deleted the conversation", alice2)
	save(r.Mine, alice2, "c2-ex1", nil, "c2 q1 again", "c2 a1 again")
	want("the deleted conversation stored again", alice2, "1:c2 q1 again", "2:c2 a1 again")

	must(t, r.Other.DeleteUser(ctx, "acme", "alice"))
	want("after the other store's erasure", alice)
	want("c2 after the other store's erasure", alice2)
	want("bob after alice's erasure", bob, "1:bob q", "2:bob a", "3:bob q2", "4:bob a2")
	// The same exchanges again, after the erasure: the same keys and seqs,
	// other texts, through either store.
	at = time.Now().Add(time.Minute)
	save(r.Other, alice, "ex1", nil, "new q1", "new a1")
	want("stored again after the erasure", alice, "1:new q1", "2:new a1")
	save(r.Mine, alice, "ex2", nil, "new q2", "new a2")
	want("stored again through it", alice, "1:new q1", "2:new a1", "3:new q2", "4:new a2")
	must(t, r.Mine.DeleteUser(ctx, "acme", "alice"))
	want("after its own erasure", alice)
	at = time.Now().Add(2 * time.Minute)
	save(r.Mine, alice, "ex1", nil, "third q1", "third a1")
	want("stored a third time", alice, "1:third q1", "2:third a1")
}
