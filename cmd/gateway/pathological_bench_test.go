package main

import (
	"flag"
	"net/http"
	"testing"
	"time"

	"github.com/memgate/memgate/bench/pathological"
)

// hostileSize is the length of the corpus's long texts in
// BenchmarkHostileInputs (-hostile-size; three times the default still
// fits every request in the default 2 MiB body limit).
var hostileSize = flag.Int("hostile-size", pathological.Size, "length of the hostile corpus's long texts, in bytes")

// BenchmarkHostileInputs sends each input of the hostile corpus
// (bench/pathological) as one memory-on request through the whole gateway
// (SQLite, default configuration, capture and enrichment against the fake
// upstream) and reports the gateway's CPU per request, from the request to
// the end of everything it started (its capture stored and enriched, its
// goroutines gone): the process's CPU time (getrusage: all threads, the
// in-process fake upstream and client included). Goal (issue 24): at most
// 3 CPU-seconds each. Each input gets a gateway of its own, so what one
// leaves behind (a larger database, fuller caches) is not charged to the
// next.
func BenchmarkHostileInputs(b *testing.B) {
	for _, in := range pathological.Sized(*hostileSize) {
		b.Run(in.Name, func(b *testing.B) {
			g := startHostileGateway(b, nil)
			base := g.idleGoroutines(b)
			b.SetBytes(int64(len(in.Body)))
			var cpu time.Duration
			for range b.N {
				before := cpuTime(b)
				if st, _ := g.send(b, in.Body); st != http.StatusOK {
					b.Fatalf("status %d", st)
				}
				g.settle(b, base, 10*time.Minute)
				cpu += cpuTime(b) - before
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/req")
		})
	}
}
