package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// ChatLockSaver is what BenchChatLock uses of a store.
type ChatLockSaver interface {
	ChatLockStore
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
}

// BenchChatLock measures what the chat lock adds to a full-history turn's
// save (record.ChatLocks takes it around every such turn): the lock and
// its release alone, a save that resends its history, and the two
// together.
func BenchChatLock(b *testing.B, s ChatLockSaver) {
	b.Helper()
	ctx := context.Background()
	user := fmt.Sprint("u-", time.Now().UnixNano())
	chat := memory.Identity{Tenant: "bench", User: user, Conversation: "chat-bench"}
	lock := func(b *testing.B) {
		_, unlock, err := s.LockChats(ctx, []memory.Identity{chat})
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
	var prior []memory.Message
	save := func(b *testing.B, i int, fence memory.Fence) {
		ex := memory.Exchange{ID: fmt.Sprint("ex-", b.Name(), i), Identity: chat, Derived: true, Prior: prior[max(0, len(prior)-16):], Fence: fence,
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprint("how much did I save in month ", i, "?")}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("You saved R$ ", 420+i, " so far.")}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			b.Fatal(err)
		}
		prior = append(prior, ex.Turn[0], ex.Reply)
	}
	b.Run("lock", func(b *testing.B) {
		for b.Loop() {
			lock(b)
		}
	})
	b.Run("history", func(b *testing.B) {
		chat.Conversation, prior = "chat-history", nil
		for i := 0; b.Loop(); i++ {
			save(b, i, 0)
		}
	})
	b.Run("history_locked", func(b *testing.B) {
		chat.Conversation, prior = "chat-locked", nil
		for i := 0; b.Loop(); i++ {
			fence, unlock, err := s.LockChats(ctx, []memory.Identity{chat})
			if err != nil {
				b.Fatal(err)
			}
			save(b, i, fence)
			unlock()
		}
	})
}
