package redis

import (
	"context"
	"fmt"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// BenchmarkRecent compares reading a conversation's recent window from
// PostgreSQL with reading it through the Redis cache.
func BenchmarkRecent(b *testing.B) {
	ctx := context.Background()
	pg := mustPG(b)
	c, _ := mustCache(b, pg, CacheConfig{})
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "bench"}
	for n := range 40 {
		if _, err := c.SaveExchange(ctx, say(id, n)); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range []struct {
		name  string
		store interface {
			Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
		}
	}{{"postgres", pg}, {"cache", c}} {
		b.Run(fmt.Sprintf("%s/n=20", s.name), func(b *testing.B) {
			for b.Loop() {
				msgs, err := s.store.Recent(ctx, id, 20)
				if err != nil || len(msgs) != 20 {
					b.Fatalf("Recent = %d messages, %v", len(msgs), err)
				}
			}
		})
	}
	b.Run("SaveExchange/through-cache", func(b *testing.B) {
		n := 1000
		for b.Loop() {
			n++
			if _, err := c.SaveExchange(ctx, say(id, n)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
