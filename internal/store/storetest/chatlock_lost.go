package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// FencedChatLockStore is a ChatLockStore whose writes under a hold of a
// chat's lock (memory.Exchange.Fence) commit only while that hold holds it
// (record.ChatLocker).
type FencedChatLockStore interface {
	ChatLockStore
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time, fence memory.Fence) (int, error)
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
}

// RunChatLockLost checks that a hold that lost a chat's lock, or ended,
// cannot store under it. a and b are two handles on one fresh database;
// lose makes a's locks of chats lapse, as for a holder that stalled past
// its lease (SQLite) or whose lock connection broke (PostgreSQL), so that
// either handle can take them.
//
// Once b holds the chat, a's save of the chat's first turn and its
// adoption under its lost hold are refused with memory.ErrLockLost,
// nothing of them stored, while b stores the turn once. So are they once
// another hold on a itself has the chat — its two lanes, say — whether
// the first hold was lost or released, and under a hold of another chat.
func RunChatLockLost(t *testing.T, a, b FencedChatLockStore, lose func(t *testing.T, chats []memory.Identity)) {
	t.Helper()
	ctx := testCtx(t)
	firstTurn := func(user, candidate string) memory.Exchange {
		return memory.Exchange{ID: "ex-first-" + user, Identity: memory.Identity{Tenant: "acme", User: user, Conversation: memory.DefaultConversation},
			Candidate: candidate, Model: "m", At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: "hi"}},
			Reply: memory.Message{Role: "assistant", Content: "hello"}}
	}
	refused := func(t *testing.T, s FencedChatLockStore, first memory.Exchange, fence memory.Fence) {
		t.Helper()
		first.Fence = fence
		if _, err := s.SaveExchange(ctx, first); !errors.Is(err, memory.ErrLockLost) {
			t.Fatalf("SaveExchange under a lost or ended hold: %v, want memory.ErrLockLost", err)
		}
		next := first
		next.ID, next.Candidate, next.Derived, next.Conversation = first.ID+"-next", "", true, first.Candidate
		next.Prior = append(first.Turn, first.Reply)
		if _, err := s.Adopt(ctx, next.Identity, "", next.Prior, time.Time{}, fence); !errors.Is(err, memory.ErrLockLost) {
			t.Fatalf("Adopt under a lost or ended hold: %v, want memory.ErrLockLost", err)
		}
		if msgs, err := s.Recent(ctx, first.Identity, 10); err != nil || len(msgs) != 0 {
			t.Fatalf("after the refused save the default conversation holds %d messages (%v), want none", len(msgs), err)
		}
	}
	stored := func(t *testing.T, s FencedChatLockStore, first memory.Exchange, fence memory.Fence) {
		t.Helper()
		first.Fence = fence
		res, err := s.SaveExchange(ctx, first)
		if err != nil || res.Inserted != 2 {
			t.Fatalf("the holder's SaveExchange: inserted %d, %v; want 2", res.Inserted, err)
		}
	}

	// Another handle took the chat.
	first := firstTurn("ana", "chat-x")
	x, _ := memory.ChatOf(first)
	lost, _ := mustHoldChats(t, a, x)
	lose(t, []memory.Identity{x})
	holds, _ := mustHoldChats(t, b, x)
	refused(t, a, first, lost)
	stored(t, b, first, holds)

	// Another hold on the same handle took it: a lane stalled, another
	// lane of the process took the chat when its lock lapsed.
	first = firstTurn("bea", "chat-x")
	x, _ = memory.ChatOf(first)
	lost, _ = mustHoldChats(t, a, x)
	lose(t, []memory.Identity{x})
	holds, release := mustHoldChats(t, a, x)
	refused(t, a, first, lost)
	release()

	// The hold ended, and another on the same handle has the chat.
	ended := holds
	holds, _ = mustHoldChats(t, a, x)
	if ended == holds {
		t.Fatalf("two holds of one handle share the fence %d", holds)
	}
	refused(t, a, first, ended)

	// A hold of another chat vouches for none of this one's writes.
	other, _ := mustHoldChats(t, a, memory.Identity{Tenant: "acme", User: "bea", Conversation: "chat-y"})
	refused(t, a, first, other)
	stored(t, a, first, holds)
}

// RunChatLockStalledAfterSave checks that a holder stalled past its lease
// right after its save of a chat's first turn committed leaves the turn
// findable by the chat's next holder: the candidate the first turn is
// adopted by (memory.Exchange.Candidate) is recorded by the save itself,
// in its transaction. a and b, and lose, are RunChatLockLost's. b then
// adopts the first turn into the continuation, which stores it once.
func RunChatLockStalledAfterSave(t *testing.T, a, b FencedChatLockStore, lose func(t *testing.T, chats []memory.Identity)) {
	t.Helper()
	ctx := testCtx(t)
	def := memory.Identity{Tenant: "acme", User: "cho", Conversation: memory.DefaultConversation}
	first := memory.Exchange{ID: "ex-stalled", Identity: def, Candidate: "chat-y", Model: "m", At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: "hi"}},
		Reply: memory.Message{Role: "assistant", Content: "hello"}}
	y, _ := memory.ChatOf(first)
	first.Fence, _ = mustHoldChats(t, a, y)
	if _, err := a.SaveExchange(ctx, first); err != nil {
		t.Fatalf("the holder's SaveExchange: %v", err)
	}
	// The holder stalls here, past its lease, before it does anything more.
	lose(t, []memory.Identity{y})
	next := first
	next.Fence, _ = mustHoldChats(t, b, y)
	next.ID, next.Candidate, next.Derived, next.Conversation, next.At = "ex-next-cho", "", true, "chat-y", first.At.Add(time.Second)
	next.Prior = append(slices.Clone(first.Turn), first.Reply)
	next.Turn = []memory.Message{{Role: "user", Content: "plan a trip"}}
	next.Reply = memory.Message{Role: "assistant", Content: "where to?"}
	if n, err := b.Adopt(ctx, next.Identity, "", next.Prior, time.Time{}, next.Fence); err != nil || n != 2 {
		t.Fatalf("the next holder's Adopt = %d, %v; want the first turn's 2 messages moved", n, err)
	}
	if _, err := b.SaveExchange(ctx, next); err != nil {
		t.Fatalf("the next holder's SaveExchange: %v", err)
	}
	if msgs, err := b.Recent(ctx, def, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("the default conversation holds %d messages (%v), want none: the first turn stored twice", len(msgs), err)
	}
	msgs, err := b.Recent(ctx, next.Identity, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	if want := []string{"hi", "hello", "plan a trip", "where to?"}; !slices.Equal(got, want) {
		t.Fatalf("the chat's conversation holds %q, want %q once each", got, want)
	}
}
