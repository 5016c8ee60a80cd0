package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// testCutHistory: a client that resends a history far longer than one
// request stores (memory.CutHistory, its first memory.BranchHead
// messages and its keep newest) stores that much on its first save, and
// then, turn after turn, exactly its two new messages, in order, never a
// message twice, alone or in a group commit, however long the history;
// a derived chat whose history parts within the head is refused (Parted)
// as a whole history would be.
func testCutHistory(t *testing.T, open func(t *testing.T) CaptureStore) {
	const (
		keep = 100
		long = 3000 // messages the client resends before its first turn here
		seed = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	)
	conv := memory.Identity{Tenant: "t1", User: "alice", Conversation: "chat-derived"}
	history := make([]memory.Message, 0, long+16)
	for i := range long {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		history = append(history, msg(t, role, fmt.Sprintf("message %d", i)))
	}
	// turn is the client's n-th turn here: its whole history resent, cut.
	turn := func(n int, history []memory.Message) memory.Exchange {
		prior, skipped := memory.CutHistory(history, keep)
		ex := exchange(conv, fmt.Sprint("ex-", n), 0, prior, []memory.Message{msg(t, "user", fmt.Sprint("question ", n))},
			msg(t, "assistant", fmt.Sprint("answer ", n)))
		ex.Skipped, ex.Derived, ex.BranchSeed = skipped, true, seed
		return ex
	}
	s := open(t)
	first := turn(1, history)
	if first.Skipped != long-memory.BranchHead-keep {
		t.Fatalf("the cut left out %d messages, want %d", first.Skipped, long-memory.BranchHead-keep)
	}
	res := mustSave(t, s, first)
	want := slices.Concat(first.Prior, first.Turn, []memory.Message{first.Reply})
	if res.Inserted != memory.BranchHead+keep+2 || res.Superseded != 0 || res.Parted {
		t.Fatalf("the first save %+v, want %d inserted", counts(res), memory.BranchHead+keep+2)
	}
	history = append(history, first.Turn[0], first.Reply)
	// The next turns: alone, then two in one group commit.
	for n := 2; n <= 3; n++ {
		ex := turn(n, history)
		res := mustSave(t, s, ex)
		if res.Inserted != 2 || res.Superseded != 0 || res.Parted {
			t.Fatalf("turn %d saved %+v, want its 2 new messages", n, counts(res))
		}
		history = append(history, ex.Turn[0], ex.Reply)
		want = append(want, ex.Turn[0], ex.Reply)
	}
	ex4 := turn(4, history)
	ex5 := turn(5, append(slices.Clone(history), ex4.Turn[0], ex4.Reply))
	got, err := s.SaveExchanges(testCtx(t), []memory.Exchange{ex4, ex5})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.Inserted != 2 || r.Superseded != 0 || r.Parted {
			t.Fatalf("turn %d of the group commit saved %+v, want its 2 new messages", 4+i, counts(r))
		}
	}
	want = append(want, ex4.Turn[0], ex4.Reply, ex5.Turn[0], ex5.Reply)
	live := mustRecent(t, s, conv, 10*long)
	assertContents(t, "the conversation", live, contents(want))

	t.Run("a long history parting within the head is refused", func(t *testing.T) {
		other := slices.Clone(history)
		other[2] = msg(t, "user", "another second question")
		ex := turn(6, other)
		ex.ID = "ex-other"
		res, err := s.SaveExchange(testCtx(t), ex)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Parted || res.Inserted != 0 {
			t.Fatalf("saved %+v, want Parted", counts(res))
		}
		if got := mustRecent(t, s, conv, 10*long); strings.Join(contents(got), "\n") != strings.Join(contents(want), "\n") {
			t.Fatalf("the refused save changed the conversation")
		}
	})
	t.Run("a new conversation gets the history's first messages", func(t *testing.T) {
		branch := conv
		branch.Conversation = "chat-branch"
		ex := turn(7, history)
		ex.Identity, ex.ID = branch, "ex-branch"
		res := mustSave(t, s, ex)
		if res.Inserted != memory.BranchHead+keep+2 {
			t.Fatalf("saved %+v, want %d inserted", counts(res), memory.BranchHead+keep+2)
		}
		got := mustRecent(t, s, branch, 10*long)
		assertContents(t, "the new conversation", got[:memory.BranchHead], contents(history[:memory.BranchHead]))
	})
}

// testCutTurn: a turn far longer than one request stores (user messages in
// a row, no reply among them: memory.CutRequest cuts it as a history,
// TurnSkipped) stores its first memory.BranchHead and keep newest messages
// and the reply; the client's next turns, resending it all as history
// (cut), store exactly their two new messages, in order, and a
// regeneration supersedes only the last turn.
func testCutTurn(t *testing.T, open func(t *testing.T) CaptureStore) {
	const (
		keep = 100
		long = 3000 // user messages in the first turn
	)
	conv := memory.Identity{Tenant: "t1", User: "alice", Conversation: "c-long-turn"}
	var msgs []memory.Message
	for i := range long {
		msgs = append(msgs, msg(t, "user", fmt.Sprintf("line %d", i)))
	}
	c := memory.CutRequest(msgs, keep)
	if c.TurnSkipped != long-memory.BranchHead-keep {
		t.Fatalf("the cut left out %d of the turn's messages, want %d", c.TurnSkipped, long-memory.BranchHead-keep)
	}
	s := open(t)
	first := exchange(conv, "ex-1", 0, c.Prior, c.Turn, msg(t, "assistant", "answer 1"))
	first.TurnSkipped = c.TurnSkipped
	if res := mustSave(t, s, first); res.Inserted != memory.BranchHead+keep+1 || res.Superseded != 0 || res.Parted {
		t.Fatalf("the first save %+v, want %d inserted", counts(res), memory.BranchHead+keep+1)
	}
	want := slices.Concat(first.Turn, []memory.Message{first.Reply})
	history := append(slices.Clone(msgs), first.Reply)
	save := func(n int, regen bool) memory.Exchange {
		t.Helper()
		q := msg(t, "user", fmt.Sprint("question ", n))
		all := append(slices.Clone(history), q)
		c := memory.CutRequest(all, keep)
		ex := exchange(conv, fmt.Sprint("ex-", n, regen), 0, c.Prior, c.Turn, msg(t, "assistant", fmt.Sprint("answer ", n, regen)))
		ex.Skipped, ex.TurnSkipped = c.Skipped, c.TurnSkipped
		res := mustSave(t, s, ex)
		// A regeneration supersedes the stored question and answer with
		// the new ones; a new turn supersedes nothing.
		if res.Inserted != 2 || (res.Superseded != 0) != regen || res.Parted {
			t.Fatalf("turn %d (regenerated: %v) saved %+v, want its 2 new messages", n, regen, counts(res))
		}
		return ex
	}
	ex2 := save(2, false)
	history = append(history, ex2.Turn[0], ex2.Reply)
	ex3 := save(3, false)
	ex3b := save(3, true) // the client regenerates its last answer
	want = append(want, ex2.Turn[0], ex2.Reply, ex3.Turn[0], ex3b.Reply)
	live := mustRecent(t, s, conv, 10*long)
	assertContents(t, "the conversation", live, contents(want))
}
