package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/redis"
)

// TestErasureReachesOtherProcesses: two wirings over the same PostgreSQL
// and Redis (two processes: a gateway and a worker, say). The user's
// erasure, served by one, makes the other forget what it keeps of the user
// that no revision guards — the vectors embedded for them and the fact
// extraction model's answers to what they said — by the erasure's notice;
// another user's stay. So do a deletion of one of the user's
// conversations.
func TestErasureReachesOtherProcesses(t *testing.T) {
	up, cfg := teaConfig(t, "postgres+redis")
	ctx := context.Background()
	serving, other := openTestMemory(t, cfg), openTestMemory(t, cfg)
	eng := engine.New(engine.Options{}, slog.New(slog.DiscardHandler))
	eng.Use(serving.Core)

	// Both subscribed before anything is erased.
	rdb, err := redis.NewClient(cfg.Store.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	channel := redis.NewErasures(rdb, cfg.Store.RedisPrefix, nil).Channel()
	eventually(t, "both processes subscribed to erasure notices", func() bool {
		n, err := rdb.PubSubNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 2
	})

	asked := func() int { return extractionsAsked(up) }
	vector := func(user string) recall.EmbeddingKey {
		return recall.EmbeddingKey{Model: "m", Dims: 1, Tenant: memory.DefaultTenant, User: user, Hash: "h"}
	}
	holds := func(m *memoryLayer, user string) bool { _, ok := m.embeddings.Get(vector(user)); return ok }

	tests := []struct {
		name  string
		erase func(user string) error
	}{
		{"user erased", func(user string) error { return eng.DeleteUser(ctx, memory.DefaultTenant, user) }},
		{"conversation deleted", func(user string) error {
			return eng.DeleteConversation(ctx, memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c"})
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user, bystander := fmt.Sprintf("noor-%d", i), fmt.Sprintf("omar-%d", i)
			sayTea(t, other, user)
			if n := asked(); n != 2*i+1 {
				t.Fatalf("the extraction model was asked %d times, want %d", n, 2*i+1)
			}
			other.embeddings.Put(vector(user), []float32{1})
			other.embeddings.Put(vector(bystander), []float32{1})
			if err := tt.erase(user); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the other process forgetting the user's vectors", func() bool { return !holds(other, user) })
			if !holds(other, bystander) {
				t.Fatal("another user's vectors were forgotten")
			}
			sayTea(t, other, user) // the same words: asked again, not answered from memory
			if n := asked(); n != 2*i+2 {
				t.Fatalf("after the erasure the extraction model was asked %d times in all, want %d", n, 2*i+2)
			}
		})
	}
}
