package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testDeletedConversationStaysDeleted: DeleteConversation dates the
// deletion (DeletedAt), and an exchange the gateway received at or before
// it — a turn in flight while the conversation was deleted, stored after —
// is dropped, by SaveExchange and by SaveExchanges (one that resends
// history too), without bringing the conversation back, even once the
// conversation was deleted a second time (which answers
// memory.ErrNotFound and dates the deletion again). An exchange received
// after the deletion is stored, whenever it was said (an import of the
// conversation's history), and so is one without Received (a replay of
// dated history, made outside the gateway's request path). The user's
// erasure clears the dates.
func testDeletedConversationStaysDeleted(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	c1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	other := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	n := 0
	ex := func(id memory.Identity, received, at time.Time, prior ...memory.Message) memory.Exchange {
		n++
		return memory.Exchange{ID: fmt.Sprintf("ex-%d", n), Identity: id, Model: "m", At: at, Received: received, Prior: prior,
			Turn: []memory.Message{msg(t, "user", fmt.Sprintf("turn %d", n))}, Reply: msg(t, "assistant", fmt.Sprintf("reply %d", n))}
	}
	save := func(what string, e memory.Exchange) memory.SaveResult {
		t.Helper()
		res, err := s.SaveExchange(ctx, e)
		if err != nil {
			t.Fatalf("%s: SaveExchange: %v", what, err)
		}
		return res
	}
	gone := func(what string) {
		t.Helper()
		if _, _, err := s.Conversation(ctx, c1); !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("%s: Conversation(c1) = %v, want memory.ErrNotFound", what, err)
		}
		cs, err := s.Conversations(ctx, c1.Tenant, c1.User)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.ID == c1.Conversation {
				t.Fatalf("%s: the deleted conversation is listed again: %+v", what, c)
			}
		}
	}

	if at, err := s.DeletedAt(ctx, c1); err != nil || !at.IsZero() {
		t.Fatalf("DeletedAt of a conversation never deleted = %v, %v; want zero", at, err)
	}
	start := time.Now().Add(-time.Minute)
	save("first turn", ex(c1, start, start))
	inflight := time.Now() // received, and reading c1, before the deletion
	save("other conversation", ex(other, inflight, inflight))
	before := time.Now().Truncate(time.Microsecond)
	if err := s.DeleteConversation(ctx, c1); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	first, err := s.DeletedAt(ctx, c1)
	if err != nil || first.Before(before) || first.After(time.Now()) {
		t.Fatalf("DeletedAt = %v, %v; want within [%v, now]", first, err, before)
	}
	if res := save("turn in flight", ex(c1, inflight, inflight)); !res.Dropped || res.Inserted != 0 {
		t.Fatalf("turn received before the deletion, saved after it = %+v; want Dropped", res)
	}
	if b, ok := s.(interface {
		SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
	}); ok {
		res, err := b.SaveExchanges(ctx, []memory.Exchange{
			ex(c1, inflight, inflight, msg(t, "user", "turn 1"), msg(t, "assistant", "reply 1")),
			ex(c1, inflight, inflight),
		})
		if err != nil || !res[0].Dropped || !res[1].Dropped {
			t.Fatalf("batch of turns in flight = %+v, %v; want both Dropped", res, err)
		}
	}
	gone("after the turns in flight")

	if err := s.DeleteConversation(ctx, c1); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("second DeleteConversation = %v, want memory.ErrNotFound", err)
	}
	second, err := s.DeletedAt(ctx, c1)
	if err != nil || second.Before(first) {
		t.Fatalf("DeletedAt after a second deletion = %v, %v; want not before %v", second, err, first)
	}
	if res := save("turn in flight, second pass", ex(c1, second, second)); !res.Dropped {
		t.Fatalf("turn received at the second deletion = %+v; want Dropped", res)
	}
	gone("after the second deletion")
	if _, _, err := s.Conversation(ctx, other); err != nil {
		t.Fatalf("the user's other conversation: %v", err)
	}

	after := second.Add(time.Millisecond)
	if res := save("import of the old history", ex(c1, after, start)); res.Inserted != 2 {
		t.Fatalf("exchange said before the deletion, received after it = %+v; want stored", res)
	}
	if res := save("fresh turn", ex(c1, time.Now(), time.Time{})); res.Inserted != 2 {
		t.Fatalf("turn after the deletion = %+v; want stored", res)
	}
	if res := save("replay", ex(c1, time.Time{}, start)); res.Inserted != 2 {
		t.Fatalf("exchange without Received, said before the deletion = %+v; want stored", res)
	}
	if _, msgs, err := s.Conversation(ctx, c1); err != nil || len(msgs) != 6 {
		t.Fatalf("conversation started again = %d messages, %v; want 6", len(msgs), err)
	}

	if err := s.DeleteUser(ctx, c1.Tenant, c1.User); err != nil {
		t.Fatal(err)
	}
	if at, err := s.DeletedAt(ctx, c1); err != nil || !at.IsZero() {
		t.Fatalf("DeletedAt after the user's erasure = %v, %v; want zero (the erasure covers it)", at, err)
	}
}

// testDeletedBeforeItsFirstSave: a conversation deleted while it holds
// nothing yet — its turns are all still queued, or in flight — answers
// memory.ErrNotFound, and its deletion is dated all the same: its turns
// received at or before the deletion are dropped when they are saved, and
// a turn received after it starts the conversation.
func testDeletedBeforeItsFirstSave(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	c9 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c9"}
	ex := func(id string, received time.Time) memory.Exchange {
		return memory.Exchange{ID: id, Identity: c9, Model: "m", At: received, Received: received,
			Turn: []memory.Message{msg(t, "user", "turn "+id)}, Reply: msg(t, "assistant", "reply "+id)}
	}
	queued := time.Now()
	if err := s.DeleteConversation(ctx, c9); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteConversation of a conversation not stored yet = %v, want memory.ErrNotFound", err)
	}
	at, err := s.DeletedAt(ctx, c9)
	if err != nil || at.Before(queued.Truncate(time.Microsecond)) {
		t.Fatalf("DeletedAt = %v, %v; want the deletion dated, not before %v", at, err, queued)
	}
	if res, err := s.SaveExchange(ctx, ex("queued", queued)); err != nil || !res.Dropped {
		t.Fatalf("a turn queued before the deletion, saved after it = %+v, %v; want Dropped", res, err)
	}
	if _, _, err := s.Conversation(ctx, c9); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("the queued turn brought the deleted conversation back: %v", err)
	}
	if res, err := s.SaveExchange(ctx, ex("fresh", at.Add(time.Millisecond))); err != nil || res.Inserted != 2 {
		t.Fatalf("a turn received after the deletion = %+v, %v; want stored", res, err)
	}
}
