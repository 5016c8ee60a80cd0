package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// CaptureStore is what the capture pipeline needs of a store beyond Store:
// group commits and dead letters.
type CaptureStore interface {
	Store
	// SaveExchanges stores exchanges in one transaction, each as
	// SaveExchange would, all or nothing; results[i] is exs[i]'s.
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
	// DeadLetter sets aside an exchange the store refused, unless its user
	// was erased at or after d.At or its conversation deleted at or after
	// d.Received (zero: d.At).
	DeadLetter(ctx context.Context, d memory.DeadLetter) error
	// DeadLetters lists a tenant's dead letters, oldest first.
	DeadLetters(ctx context.Context, tenant string) ([]memory.DeadLetter, error)
}

// RunCapture runs the capture contract against stores made by open.
func RunCapture(t *testing.T, open func(t *testing.T) CaptureStore) {
	alice := memory.Identity{Tenant: "t1", User: "alice", Conversation: "c1"}
	t.Run("group commit stores like one by one, in order", func(t *testing.T) {
		s, ctx := open(t), testCtx(t)
		other := alice
		other.Conversation = "c2"
		var exs []memory.Exchange
		for i := range 6 {
			id := alice
			if i%2 == 1 {
				id = other
			}
			exs = append(exs, exchange(id, fmt.Sprint("ex", i), i, nil,
				[]memory.Message{msg(t, "user", fmt.Sprint("q", i))}, msg(t, "assistant", fmt.Sprint("a", i))))
		}
		exs = append(exs, exs[0]) // a redelivery inside the group
		res, err := s.SaveExchanges(ctx, exs)
		if err != nil {
			t.Fatalf("SaveExchanges: %v", err)
		}
		if len(res) != len(exs) || !res[6].Duplicate || res[0].Inserted != 2 {
			t.Fatalf("results %+v", res)
		}
		for _, c := range []struct {
			id   memory.Identity
			want string
		}{{alice, "user:q0 assistant:a0 user:q2 assistant:a2 user:q4 assistant:a4"}, {other, "user:q1 assistant:a1 user:q3 assistant:a3 user:q5 assistant:a5"}} {
			msgs, err := s.Recent(ctx, c.id, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(contents(msgs), " "); got != c.want {
				t.Fatalf("%s holds %q, want %q", c.id.Conversation, got, c.want)
			}
		}
	})
	t.Run("group commit aligns resent history as one by one does", func(t *testing.T) {
		s, ctx := open(t), testCtx(t)
		one, group := alice, alice
		one.Conversation, group.Conversation = "one", "group"
		q := func(i int) memory.Message { return msg(t, "user", fmt.Sprint("q", i)) }
		a := func(i int) memory.Message { return msg(t, "assistant", fmt.Sprint("a", i)) }
		// A client that resends its history, then edits its second turn,
		// then goes on from the edit, with a never-seen message in between.
		steps := []struct{ prior, turn []memory.Message }{
			{nil, []memory.Message{q(0)}},
			{[]memory.Message{q(0), a(0)}, []memory.Message{q(1)}},
			{[]memory.Message{q(0), a(0), q(1), a(1)}, []memory.Message{q(2)}},
			{[]memory.Message{q(0), a(0), msg(t, "user", "q1 edited"), a(9)}, []memory.Message{q(3)}},
			{[]memory.Message{q(0), a(0), msg(t, "user", "q1 edited"), a(9), q(3), a(3), msg(t, "user", "unseen"), a(8)}, []memory.Message{q(4)}},
		}
		var exs []memory.Exchange
		var want []memory.SaveResult
		for i, st := range steps {
			ex := exchange(one, fmt.Sprint("ex", i), i, st.prior, st.turn, a(i))
			res, err := s.SaveExchange(ctx, ex)
			if err != nil {
				t.Fatalf("SaveExchange %d: %v", i, err)
			}
			want = append(want, res)
			ex.Identity = group
			exs = append(exs, ex)
		}
		got, err := s.SaveExchanges(ctx, exs)
		if err != nil {
			t.Fatalf("SaveExchanges: %v", err)
		}
		for i := range want {
			if counts(got[i]) != counts(want[i]) || len(got[i].Stored) != got[i].Inserted {
				t.Fatalf("exchange %d: group %+v, one by one %+v", i, got[i], want[i])
			}
		}
		// The last exchange's messages are the conversation's newest.
		checkStored(t, s, group, got[len(got)-1])
		for _, n := range []int{3, 100} {
			o, err := s.Recent(ctx, one, n)
			if err != nil {
				t.Fatal(err)
			}
			g, err := s.Recent(ctx, group, n)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(contents(g), " ") != strings.Join(contents(o), " ") || len(o) == 0 {
				t.Fatalf("group holds %q, one by one %q", contents(g), contents(o))
			}
			for i := range o {
				if g[i].Seq != o[i].Seq || g[i].Key[len(g[i].Key)-2:] != o[i].Key[len(o[i].Key)-2:] {
					t.Fatalf("message %d: group seq %d key %s, one by one seq %d key %s", i, g[i].Seq, g[i].Key, o[i].Seq, o[i].Key)
				}
			}
		}
	})
	t.Run("group commit drops an erased user's exchanges and keeps the others", func(t *testing.T) {
		s, ctx := open(t), testCtx(t)
		bob := memory.Identity{Tenant: "t1", User: "bob", Conversation: "c1"}
		if _, err := s.SaveExchange(ctx, exchange(bob, "old", 0, nil, []memory.Message{msg(t, "user", "q")}, msg(t, "assistant", "a"))); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUser(ctx, "t1", "bob"); err != nil {
			t.Fatal(err)
		}
		// Bob's exchange dates from before his erasure (baseTime); alice's too,
		// but she was never erased.
		res, err := s.SaveExchanges(ctx, []memory.Exchange{
			exchange(bob, "late", 1, nil, []memory.Message{msg(t, "user", "q2")}, msg(t, "assistant", "a2")),
			exchange(alice, "fine", 1, nil, []memory.Message{msg(t, "user", "q3")}, msg(t, "assistant", "a3")),
		})
		if err != nil {
			t.Fatalf("SaveExchanges: %v", err)
		}
		if !res[0].Dropped || res[1].Dropped || res[1].Inserted != 2 {
			t.Fatalf("results %+v", res)
		}
		if cs, err := s.Conversations(ctx, "t1", "bob"); err != nil || len(cs) != 0 {
			t.Fatalf("erased bob has conversations %+v (%v)", cs, err)
		}
		if msgs, _ := s.Recent(ctx, alice, 10); len(msgs) != 2 {
			t.Fatalf("alice holds %d messages, want 2", len(msgs))
		}
	})
	t.Run("group commit is all or nothing", func(t *testing.T) {
		s, ctx := open(t), testCtx(t)
		good := exchange(alice, "good", 0, nil, []memory.Message{msg(t, "user", "q")}, msg(t, "assistant", "a"))
		bad := good
		bad.ID, bad.Conversation = "bad", "not/an/id"
		if _, err := s.SaveExchanges(ctx, []memory.Exchange{good, bad}); !errors.Is(err, memory.ErrInvalid) {
			t.Fatalf("SaveExchanges with an invalid exchange = %v, want ErrInvalid", err)
		}
		if msgs, _ := s.Recent(ctx, alice, 10); len(msgs) != 0 {
			t.Fatalf("stored %d messages of a failed group", len(msgs))
		}
	})
	t.Run("an exchange id is scoped to its conversation", func(t *testing.T) {
		s, ctx := open(t), testCtx(t)
		bob := memory.Identity{Tenant: "t1", User: "bob", Conversation: "c1"}
		other := alice
		other.Conversation = "c2"
		for _, id := range []memory.Identity{alice, bob, other} {
			res, err := s.SaveExchange(ctx, exchange(id, "same-id", 0, nil, []memory.Message{msg(t, "user", "q")}, msg(t, "assistant", "a")))
			if err != nil || res.Duplicate || res.Inserted != 2 {
				t.Fatalf("save into %+v: %+v, %v", id, res, err)
			}
		}
	})
	t.Run("dead letters keep the payload and honour erasure", func(t *testing.T) {
		s, ctx := open(t), testCtx(t)
		payload := []byte("{\"turn\":\"nul \x00 and \xff\"}")
		d := memory.DeadLetter{Exchange: "ex1", Identity: alice, Reason: "SQLSTATE 22021", Payload: payload, At: baseTime}
		if err := s.DeadLetter(ctx, d); err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
		got, err := s.DeadLetters(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Exchange != "ex1" || got[0].User != "alice" || string(got[0].Payload) != string(payload) {
			t.Fatalf("dead letters %+v", got)
		}
		if err := s.DeleteUser(ctx, "t1", "bob"); err != nil {
			t.Fatal(err)
		}
		late := d
		late.Identity.User, late.Exchange = "bob", "ex2"
		if err := s.DeadLetter(ctx, late); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.DeadLetters(ctx, "t1"); len(got) != 1 {
			t.Fatalf("a dead letter of an erased user was written: %+v", got)
		}
		if err := s.DeleteUser(ctx, "t1", "alice"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.DeadLetters(ctx, "t1"); len(got) != 0 {
			t.Fatalf("erasing alice kept her dead letters: %+v", got)
		}
	})
	t.Run("a save with a branch seed never supersedes another history", func(t *testing.T) { testGuard(t, open) })
	t.Run("a resent history cut to its head and newest stores only what is new", func(t *testing.T) { testCutHistory(t, open) })
	t.Run("a turn cut to its head and newest, resent as history, stores only what is new", func(t *testing.T) { testCutTurn(t, open) })
	t.Run("a dead letter of a deleted conversation's turn is not written", func(t *testing.T) {
		testDeadLetterOfDeletedConversation(t, open(t))
	})
	t.Run("deleting a conversation never stored deletes its dead letters", func(t *testing.T) {
		testDeadLetterOfUnstoredConversation(t, open(t))
	})
}
