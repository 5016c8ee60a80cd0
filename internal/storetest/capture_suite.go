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
	// was erased at or after d.At.
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
}
