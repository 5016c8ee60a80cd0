package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/tracing"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// BenchmarkTracing sends memory-on chat completions (SQLite, recall on, a
// conversation warmed with 20 turns, one request at a time) through the
// whole gateway with tracing off and on (every span recorded, batched to
// an exporter that discards): the cost of tracing per request, in wall
// time, CPU and allocations. Run the two alternately, e.g.
//
//	go test ./cmd/gateway -run '^$' -bench 'BenchmarkTracing' -benchtime 400x -count 3 -benchmem
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			up := upstreamtest.New(b, echoUpstream())
			cfg := config.Default()
			cfg.Upstream.BaseURL = up.URL()
			cfg.Store.SQLitePath = filepath.Join(b.TempDir(), "memgate.db")
			tr := tracing.Off()
			if mode == "on" {
				tr = tracing.New(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()), "bench", false)
			}
			url := startTracedGateway(b, cfg, tr)
			hdr := headers("", "bench-user", "bench-conv")
			send := func(i int) {
				body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []any{user(fmt.Sprintf("Turn %d: what should I budget for groceries this week?", i))}})
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			for i := range 20 {
				send(i)
			}
			cpu := processCPU(b)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				send(20 + i)
			}
			cpu.report(b)
			b.StopTimer()
			tr.Shutdown(b.Context())
		})
	}
}
