package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

// BenchmarkSave measures the write path: one new-message-only exchange
// (the common case), one that resends its history (aligned against the
// live tail), a group commit of 8 exchanges of different conversations, and
// AddItems of one exchange's two message items.
func BenchmarkSave(b *testing.B) {
	s := mustOpen(b)
	ctx := context.Background()
	run := fmt.Sprint(time.Now().UnixNano())
	turn := func(id memory.Identity, n int, prior []memory.Message) memory.Exchange {
		return memory.Exchange{ID: fmt.Sprint("ex-", n), Identity: id, Prior: prior,
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprint("how much did I save in month ", n, "?")}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("You saved R$ ", 420+n, " so far.")}}
	}
	b.Run("turn", func(b *testing.B) {
		id := memory.Identity{Tenant: "bench", User: "u-" + run, Conversation: "turn"}
		for i := 0; b.Loop(); i++ {
			if _, err := s.SaveExchange(ctx, turn(id, i, nil)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("history", func(b *testing.B) {
		id := memory.Identity{Tenant: "bench", User: "u-" + run, Conversation: "history"}
		var prior []memory.Message
		for i := 0; b.Loop(); i++ {
			ex := turn(id, i, prior[max(0, len(prior)-16):])
			if _, err := s.SaveExchange(ctx, ex); err != nil {
				b.Fatal(err)
			}
			prior = append(prior, ex.Turn[0], ex.Reply)
		}
	})
	b.Run("batch8", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			exs := make([]memory.Exchange, 8)
			for k := range exs {
				exs[k] = turn(memory.Identity{Tenant: "bench", User: "u-" + run, Conversation: fmt.Sprint("b", k)}, i, nil)
			}
			if _, err := s.SaveExchanges(ctx, exs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("items", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			items := make([]memory.Item, 2)
			for k := range items {
				items[k] = memory.Item{Tenant: "bench", User: "u-" + run, Conversation: "turn", Kind: "message",
					Ref: memory.Key(fmt.Sprint("ex-", i), k), Text: fmt.Sprint("item text ", i, " ", k), GuardSince: time.Now()}
			}
			if err := s.AddItems(ctx, items); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLongHistory measures the first capture and the indexing of a
// 45,000-message request (storetest.BenchLongHistory).
func BenchmarkLongHistory(b *testing.B) {
	storetest.BenchLongHistory(b, mustOpen(b), 45_000, fmt.Sprint("long-", time.Now().UnixNano()))
}
