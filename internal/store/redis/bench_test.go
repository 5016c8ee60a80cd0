package redis

import (
	"context"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// BenchmarkRecent compares reading a conversation's newest turns from
// PostgreSQL with reading them from Tails.
func BenchmarkRecent(b *testing.B) {
	ctx := context.Background()
	pg := mustPG(b)
	tails := mustTails(b, 0)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "bench"}
	for n := range 40 {
		if _, err := pg.SaveExchange(ctx, say(id, n)); err != nil {
			b.Fatal(err)
		}
	}
	window, err := pg.Recent(ctx, id, 50)
	if err != nil {
		b.Fatal(err)
	}
	tails.KeepTail(ctx, id, 1, window, false)
	b.Run("postgres/n=50", func(b *testing.B) {
		for b.Loop() {
			if msgs, err := pg.Recent(ctx, id, 50); err != nil || len(msgs) != 50 {
				b.Fatalf("Recent = %d messages, %v", len(msgs), err)
			}
		}
	})
	b.Run("tails/n=50", func(b *testing.B) {
		for b.Loop() {
			if msgs, _, ok := tails.Tail(ctx, id, 1); !ok || len(msgs) != 50 {
				b.Fatalf("Tail = %d messages, %v", len(msgs), ok)
			}
		}
	})
}
