package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/bench/fakeupstream"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/tokens"
)

// hostileGateway is the whole gateway in this process — SQLite store,
// capture worker and enricher (compaction, fact extraction and recall
// indexing against the fake upstream), the budgeted assembler with recall —
// for the hostile-input corpus (bench/pathological): tests count its work,
// the benchmark its CPU.
type hostileGateway struct {
	URL     string
	counter *tokens.Counter
	mem     *memoryLayer
	client  *http.Client
	seq     int
	// answered counts the requests answered 200, each an exchange
	// enriched counts (memgate_enrich_exchanges_total) once enriched.
	answered int
	enriched *prometheus.Registry
}

// startHostileGateway wires the gateway — the default configuration with
// a SQLite store in a temporary directory and the fake upstream, then tune
// (when not nil) — and stops it when tb ends.
func startHostileGateway(tb testing.TB, tune func(*config.Config)) *hostileGateway {
	tb.Helper()
	up := httptest.NewServer(fakeupstream.Handler(fakeupstream.Options{}))
	tb.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Upstream.BaseURL = up.URL + "/v1"
	cfg.Store.SQLitePath = filepath.Join(tb.TempDir(), "memgate.db")
	if tune != nil {
		tune(&cfg)
	}
	// A counter of its own, so the work it reports is this gateway's.
	counter, err := tokens.New(cfg.ContextWindows)
	if err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	mem, err := openMemory(ctx, cfg, nil, counter, nil, logger)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	h, err := newTestHTTP(cfg, mem.Core, nil, logger)
	if err != nil {
		cancel()
		mem.Close()
		tb.Fatal(err)
	}
	hs := httptest.NewServer(h.srv.Handler())
	var wg sync.WaitGroup
	wg.Go(func() { _ = mem.RunWorkers(ctx, true, logger) })
	tb.Cleanup(func() {
		hs.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = mem.Capturer.Close(sctx)
		cancel()
		wg.Wait()
		mem.Close()
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(mem.Enricher.Collectors()...)
	return &hostileGateway{URL: hs.URL, counter: counter, mem: mem, client: hs.Client(), enriched: reg}
}

// enrichedExchanges is how many exchanges the enricher has enriched.
func (g *hostileGateway) enrichedExchanges(tb testing.TB) int {
	tb.Helper()
	mfs, err := g.enriched.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "memgate_enrich_exchanges_total" {
			return int(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	return 0
}

// send posts body as a new user's memory-on chat completion and returns
// the response's status and headers.
func (g *hostileGateway) send(tb testing.TB, body []byte) (int, http.Header) {
	tb.Helper()
	g.seq++
	req, err := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", fmt.Sprintf("hostile-%d", g.seq))
	req.Header.Set("X-Memory-Conversation", "c")
	res, err := g.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		tb.Fatal(err)
	}
	if res.StatusCode == http.StatusOK {
		g.answered++
	}
	return res.StatusCode, res.Header
}

// settle waits until the gateway has finished everything the requests sent
// so far started: every exchange answered is enriched (the queues alone
// can both be empty before a capture is saved), the capture queue and the
// enrichment outbox are empty and the goroutines are back to at most base
// (the gateway's idle count plus slack). It fails after limit.
func (g *hostileGateway) settle(tb testing.TB, base int, limit time.Duration) {
	tb.Helper()
	ctx := context.Background()
	pending := func() int64 {
		var n int64
		for _, q := range []interface {
			Pending(context.Context) (int64, error)
		}{g.mem.queue.(*sqlite.Outbox), g.mem.store.(cachedStore).store.(*sqlite.Store).EnrichOutbox()} {
			p, err := q.Pending(ctx)
			if err != nil {
				tb.Fatal(err)
			}
			n += p
		}
		return n
	}
	deadline := time.Now().Add(limit)
	for {
		p, gs, e := pending(), runtime.NumGoroutine(), g.enrichedExchanges(tb)
		if e >= g.answered && p == 0 && gs <= base {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not settled after %v: %d of %d exchanges enriched, %d pending, %d goroutines (idle %d)", limit, e, g.answered, p, gs, base)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// idleGoroutines is the goroutine count of a settled gateway, plus slack
// for the HTTP client's and servers' idle connections.
func (g *hostileGateway) idleGoroutines(tb testing.TB) int {
	tb.Helper()
	st, _ := g.send(tb, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}`))
	if st != http.StatusOK {
		tb.Fatalf("warm-up: status %d", st)
	}
	g.settle(tb, 1<<30, time.Minute)
	time.Sleep(100 * time.Millisecond) // connection goroutines come and go
	return runtime.NumGoroutine() + 8
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
