package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestTombstonesOutliveAnUnreachableSharedQueue: a gateway on PostgreSQL
// whose Redis was down at start-up serves without the capture queue the
// other gateways and workers share, so it cannot tell how old that
// queue's oldest entry is — a turn of a conversation deleted over a week
// ago, queued after the deletion's purge, may still wait there. Its
// deletions then expire no tombstone of a conversation never stored:
// one that went would let that turn start the deleted conversation
// again. (A gateway that reaches the queue expires them by its oldest
// entry: internal/engine's TestDeletedConversationStaysDeletedThroughALongBacklog.)
func TestTombstonesOutliveAnUnreachableSharedQueue(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := storeConfigs(t, up)["postgres+redis"](t)
	cfg.Store.RedisURL = unreachableRedisURL(t)
	ctx := context.Background()
	m := openTestMemory(t, cfg)
	if m.queue != nil {
		t.Fatal("a capture queue was opened on a Redis nobody listens on")
	}
	e := engineFor(m.Core)
	c9 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c9"}
	if err := e.DeleteConversation(ctx, c9); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteConversation(c9) = %v, want memory.ErrNotFound (never stored)", err)
	}
	conn, err := pgx.Connect(ctx, cfg.Store.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	age := memory.UnstoredTombstoneLife + 24*time.Hour
	if _, err := conn.Exec(ctx, `UPDATE conversation_tombstones SET deleted_at = deleted_at - $1::interval`, age.String()); err != nil {
		t.Fatal(err)
	}
	_ = e.DeleteConversation(ctx, memory.Identity{Tenant: "acme", User: "alice", Conversation: "c10"})
	if at, err := m.store.DeletedAt(ctx, c9); err != nil || at.IsZero() {
		t.Errorf("c9's tombstone after a deletion by a gateway that cannot read the shared queue: %v, %v; want it kept", at, err)
	}
}
