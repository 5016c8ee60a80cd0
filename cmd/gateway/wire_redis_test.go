package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/testenv"
)

// postgresRedisConfig is the default configuration on the test
// PostgreSQL with the test Redis beside it, under a prefix of its own.
func postgresRedisConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Store.Driver = "postgres"
	cfg.Store.PostgresURL = testenv.PostgresURL(t)
	cfg.Store.RedisURL = testenv.RedisURL(t)
	cfg.Store.RedisPrefix = testenv.RedisPrefix(t)
	return cfg
}

// TestOneRedisClientServesStoreAndPrints: a serving process opens one
// client of the Redis beside PostgreSQL (openRedis), and both the store's
// queues and the proxy's shared prints go over it, through its one pool;
// the store, closed (the engine stops it, or gives up a start to retry
// it), leaves the client open, so the prints still answer until the
// process closes it, once.
func TestOneRedisClientServesStoreAndPrints(t *testing.T) {
	ctx := context.Background()
	cfg := postgresRedisConfig(t)
	conn, err := openRedis(cfg, slog.New(slog.DiscardHandler))
	if err != nil || conn == nil {
		t.Fatalf("openRedis = %v, %v; want a client", conn, err)
	}
	rdb := conn.client
	t.Cleanup(func() { _ = conn.Close() })
	gets := func() uint32 { s := rdb.PoolStats(); return s.Hits + s.Misses }

	before := gets()
	b, err := openStore(ctx, cfg, conn, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if b.queue == nil || b.queueUnreachable {
		t.Fatal("the store opened no Redis queue")
	}
	if gets() == before {
		t.Error("the store's queue did not go through the process's client")
	}

	prints := openPrints(cfg, conn)
	if prints == nil {
		t.Fatal("no shared prints with Redis and capture.skip_transcripts on")
	}
	user := [32]byte{1, 2, 3}
	if err := prints.AddPrint(ctx, user, []byte("print"), 4, time.Minute); err != nil {
		t.Fatal(err)
	}
	before = gets()
	if _, err := prints.Prints(ctx, user); err != nil {
		t.Fatal(err)
	}
	if gets() == before {
		t.Error("the prints' read did not go through the process's client")
	}

	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	got, err := prints.Prints(ctx, user)
	if err != nil || !slices.EqualFunc(got, [][]byte{[]byte("print")}, slices.Equal) {
		t.Fatalf("after the store closed: Prints = %q, %v; want the print (the client still open)", got, err)
	}
	if err := prints.ForgetPrints(ctx, user); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Close(); err != nil {
		t.Errorf("closing the process's client: %v (closed before?)", err)
	}
}

// TestSharedPrintsNeedRedis: without the Redis beside PostgreSQL there is
// no client to open, and without it, or with capture.skip_transcripts
// off, no shared prints (each process keeps its own, or none).
func TestSharedPrintsNeedRedis(t *testing.T) {
	sqlite := config.Default()
	sqlite.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
	pgOnly := config.Default()
	pgOnly.Store.Driver, pgOnly.Store.PostgresURL = "postgres", "postgres://127.0.0.1:1/none"
	for name, cfg := range map[string]config.Config{"sqlite": sqlite, "postgres without redis": pgOnly} {
		if rdb, err := openRedis(cfg, slog.New(slog.DiscardHandler)); rdb != nil || err != nil {
			t.Errorf("%s: openRedis = %v, %v; want none", name, rdb, err)
		}
		if p := openPrints(cfg, nil); p != nil {
			t.Errorf("%s: shared prints without Redis", name)
		}
	}
	off := config.Default()
	off.Capture.SkipTranscripts = false
	rdb, err := redis.NewClient("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if p := openPrints(off, &redisConn{client: rdb}); p != nil {
		t.Error("shared prints with capture.skip_transcripts off")
	}
}
