package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/store/redis"
)

// TestWorkerEnrichQueueIgnoresRedisBreaker: with the process's Redis
// breaker open (a request-path call timed out, Redis not answering its
// probe), the chats' enrichment enqueues are skipped, but the capture
// worker's are made: the worker waits on no chat, and acknowledges the
// capture entries whose exchanges it queued for enrichment, so a skip
// there would lose their enrichment for good.
func TestWorkerEnrichQueueIgnoresRedisBreaker(t *testing.T) {
	ctx := context.Background()
	cfg := postgresRedisConfig(t)
	live, err := redis.NewClient(cfg.Store.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	g := newRedisGate(t, cfg.Store.RedisURL)
	g.darken()
	dark, err := redis.NewClient(g.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dark.Close() })
	// The breaker's probe pings the dark Redis: once open, it stays open.
	conn := &redisConn{client: live, breaker: redis.NewBreaker(dark, slog.New(slog.DiscardHandler))}
	t.Cleanup(func() { _ = conn.Close() })
	b, err := openStore(ctx, cfg, conn, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.close() })

	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := redis.NewResenders(dark, cfg.Store.RedisPrefix, conn.breaker).Resends(tctx, [32]byte{1}); err == nil {
		t.Fatal("a request-path call to a dark Redis answered")
	}
	eventually(t, "the breaker to open", conn.breaker.Open)
	if err := b.enrich.EnqueueBatch(ctx, [][]byte{[]byte("chat")}); !errors.Is(err, redis.ErrBreakerOpen) {
		t.Fatalf("a chat's enrichment enqueue while the breaker is open: %v, want ErrBreakerOpen", err)
	}
	if b.workerEnrich == nil {
		t.Fatal("no worker enrichment queue")
	}
	if err := b.workerEnrich.EnqueueBatch(ctx, [][]byte{[]byte("worker")}); err != nil {
		t.Fatalf("the worker's enrichment enqueue while the breaker is open: %v; want it made (the worker waits on no chat)", err)
	}
}
