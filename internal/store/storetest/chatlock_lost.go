package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// FencedChatLockStore is a ChatLockStore whose writes under a chat's lock
// commit only while its holder holds it (record.ChatLocker).
type FencedChatLockStore interface {
	ChatLockStore
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	RecordCandidate(ctx context.Context, id memory.Identity, exchangeID, candidate string) error
	Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time) (int, error)
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
}

// RunChatLockLost checks that a holder that lost a chat's lock cannot
// store under it. a and b are two handles on one fresh database; lose
// makes a's lock of chats lapse, as for a holder that
// stalled past its lease (SQLite) or whose lock connection broke
// (PostgreSQL), so that b can take it.
//
// Once b holds the chat, a's save of the chat's first turn, of its
// candidate and its adoption are refused with memory.ErrLockLost, nothing
// of them stored, while b stores the turn once.
func RunChatLockLost(t *testing.T, a, b FencedChatLockStore, lose func(t *testing.T, chats []memory.Identity)) {
	t.Helper()
	ctx := testCtx(t)
	first := memory.Exchange{ID: "ex-first", Identity: memory.Identity{Tenant: "acme", User: "ana", Conversation: memory.DefaultConversation},
		Candidate: "chat-x", Model: "m", At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: "hi"}},
		Reply: memory.Message{Role: "assistant", Content: "hello"}}
	x, _ := memory.ChatOf(first)
	mustLockChats(t, a, x)
	lose(t, []memory.Identity{x})
	mustLockChats(t, b, x)

	if _, err := a.SaveExchange(ctx, first); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("SaveExchange under a lost lock: %v, want memory.ErrLockLost", err)
	}
	if err := a.RecordCandidate(ctx, first.Identity, first.ID, first.Candidate); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("RecordCandidate under a lost lock: %v, want memory.ErrLockLost", err)
	}
	next := first
	next.ID, next.Candidate, next.Derived, next.Conversation = "ex-next", "", true, "chat-x"
	next.Prior = append(first.Turn, first.Reply)
	if _, err := a.Adopt(ctx, next.Identity, "", next.Prior, time.Time{}); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("Adopt under a lost lock: %v, want memory.ErrLockLost", err)
	}
	if msgs, err := b.Recent(ctx, first.Identity, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("after the refused save the default conversation holds %d messages (%v), want none", len(msgs), err)
	}
	res, err := b.SaveExchange(ctx, first)
	if err != nil || res.Inserted != 2 {
		t.Fatalf("the new holder's SaveExchange: inserted %d, %v; want 2", res.Inserted, err)
	}
}
