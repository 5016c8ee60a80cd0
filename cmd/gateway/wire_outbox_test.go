package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/testenv"
)

// TestSQLiteOutboxIsShared: processes on one SQLite file (`gateway serve`
// and `gateway worker`, two gateways) share its capture outbox, so the
// wiring gives the worker the outbox's lease (one drains it at a time)
// and the Capturer its per-conversation counts (a turn follows those
// another process queued), as it does with Redis; and the enricher its
// enrichment outbox's lease, so one process enriches at a time.
func TestSQLiteOutboxIsShared(t *testing.T) {
	cfg := config.Default()
	cfg.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
	bk, err := openStore(context.Background(), cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bk.close() })
	if bk.queue == nil || bk.lease == nil || bk.shared == nil {
		t.Fatalf("sqlite backend: queue %v, lease %v, shared %v; want all three", bk.queue != nil, bk.lease != nil, bk.shared != nil)
	}
	if ob, ok := bk.enrich.(*sqlite.Outbox); !ok || bk.enrichLease != record.Leaser(ob) {
		t.Fatalf("sqlite backend: enrichment lease %v, want the enrichment outbox's", bk.enrichLease)
	}
}

// TestRedisEnrichmentIsLeasedPerConversation: gateways and workers on
// PostgreSQL and Redis share the enrichment stream, so the wiring gives
// the enricher the stream's conversation leases (one process enriches a
// conversation at a time) and no lease on the whole stream (every
// process enriches at once).
func TestRedisEnrichmentIsLeasedPerConversation(t *testing.T) {
	cfg := config.Default()
	cfg.Store.Driver, cfg.Store.PostgresURL = "postgres", testenv.PostgresURL(t)
	cfg.Store.RedisURL, cfg.Store.RedisPrefix = testenv.RedisURL(t), testenv.RedisPrefix(t)
	bk, err := openStore(context.Background(), cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bk.close() })
	if _, ok := bk.enrich.(*redis.Queue); !ok {
		t.Fatalf("postgres+redis backend: enrichment queue %T, want the Redis stream", bk.enrich)
	}
	if _, ok := bk.conversations.(*redis.Leases); !ok || bk.enrichLease != nil {
		t.Fatalf("postgres+redis backend: conversation leases %T, stream lease %v; want the stream's conversation leases only", bk.conversations, bk.enrichLease)
	}
}
