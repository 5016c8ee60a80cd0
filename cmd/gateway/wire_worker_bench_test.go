package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/bench/fakeupstream"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// pendingQueue is a capture queue that reports its backlog (the SQLite
// outbox, the Redis stream).
type pendingQueue interface {
	Pending(ctx context.Context) (int64, error)
}

// benchWords feed the synthetic turns of BenchmarkCaptureWorker.
var benchWords = strings.Fields(`budget savings rent coffee train ticket holiday Lisbon Porto salary
	invoice groceries vegetarian dinner recipe marathon training plan weekend meeting deadline project
	report insurance mortgage interest rate pension account transfer subscription gym yoga cinema book`)

// workerTurn is the user text of turn seq of conversation conv: 8 to 24
// words, with a stated preference now and then (pattern facts).
func workerTurn(conv, seq int) string {
	n := 8 + (conv*7+seq*13)%17
	words := make([]string, n)
	for i := range words {
		words[i] = benchWords[(conv*31+seq*17+i*11)%len(benchWords)]
	}
	s := strings.Join(words, " ") + "?"
	if seq%10 == 3 {
		s = "I prefer " + words[0] + " over " + words[1] + ". " + s
	}
	return s
}

// BenchmarkCaptureWorker measures the capture worker with the default
// after-save hooks (compaction, fact extraction against a local fake
// upstream, recall indexing with the local embedder) on a SQLite store:
// b.N exchanges spread over 16 warm conversations (20 turns each before
// the clock starts) are enqueued, then drained by the worker. It reports
// exchanges/s; ns/op and allocs/op are per exchange, all goroutines.
// "batched" is the gateway's wiring (the hooks run once per claimed
// batch); "per-exchange" runs them after each save, as direct saves do.
// The pg variants do the same on PostgreSQL with the Redis queue.
func BenchmarkCaptureWorker(b *testing.B) {
	for _, store := range []string{"sqlite", "pg"} {
		for _, mode := range []string{"batched", "per-exchange"} {
			b.Run(store+"/"+mode, func(b *testing.B) { benchCaptureWorker(b, store, mode == "batched") })
		}
	}
}

func benchCaptureWorker(b *testing.B, store string, batched bool) {
	up := httptest.NewServer(fakeupstream.Handler(fakeupstream.Options{}))
	defer up.Close()
	cfg := config.Default()
	// The hashed embedder: this measures the worker's batching and the
	// stores' writes, which the encoder's ~6 ms a message indexed would
	// drown.
	cfg.Recall.Embeddings.Provider = "local"
	cfg.Upstream.BaseURL = up.URL + "/v1"
	cfg.Store.SQLitePath = filepath.Join(b.TempDir(), "memgate.db")
	if store == "pg" {
		cfg.Store.Driver = "postgres"
		cfg.Store.PostgresURL = testenv.PostgresURL(b)
		cfg.Store.RedisURL = testenv.RedisURL(b)
		cfg.Store.RedisPrefix = testenv.RedisPrefix(b)
	}
	counter, err := sharedCounter()
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mem, err := openMemory(ctx, cfg, nil, counter, nil, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	pq, ok := mem.queue.(pendingQueue)
	if !ok || mem.Worker == nil {
		b.Fatalf("no pending-aware capture queue (%T)", mem.queue)
	}
	worker := mem.Worker
	if !batched {
		worker = record.NewWorker(mem.queue, record.WithHooks(mem.store, mem.hooks...), logger, record.WorkerOptions{})
	}
	const convs = 16
	seqs := make([]int, convs)
	n := 0
	enqueue := func(count int) {
		b.Helper()
		for range count {
			c := n % convs
			n++
			id := fmt.Sprintf("bench-%d", c)
			ex := memory.Exchange{
				ID:       fmt.Sprintf("ex-%d-%d", c, seqs[c]),
				Identity: memory.Identity{Tenant: "default", User: id, Conversation: id},
				Model:    "gpt-4o-mini",
				Turn:     []memory.Message{{Role: "user", Content: workerTurn(c, seqs[c])}},
				Reply:    memory.Message{Role: "assistant", Content: "Hello! This is a fixed benchmark reply from the fake upstream, streamed in pieces."},
				At:       time.Now().UTC(),
			}
			seqs[c]++
			payload, err := json.Marshal(ex)
			if err != nil {
				b.Fatal(err)
			}
			if err := mem.queue.Enqueue(ctx, payload); err != nil {
				b.Fatal(err)
			}
		}
	}
	drain := func() {
		b.Helper()
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); worker.Run(wctx) }()
		defer func() { stop(); <-done }()
		deadline := time.Now().Add(10 * time.Minute)
		for {
			p, err := pq.Pending(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if p == 0 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d exchanges still pending", p)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	enqueue(20 * convs)
	drain()
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	enqueue(b.N)
	b.StartTimer()
	start := time.Now()
	drain()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "exchanges/s")
}
