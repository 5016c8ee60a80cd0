package encoder

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// reportCPU reports the process's CPU time per op since start: on a machine
// shared with other work it varies less than the wall time, which counts
// the time the benchmark waited for a core.
func reportCPU(b *testing.B, start time.Duration, ops int) {
	b.ReportMetric(float64(cpuNow()-start)/float64(ops), "cpu-ns/op")
}

// query20 is a 20-word question, as a user asks one.
const query20 = "Last spring my sister told me about the new job she had found in Lisbon, what was the company called again?"

// BenchmarkEmbedQuery is one 20-word query embedded alone (the request
// path's cost on a cache miss). Run with -cpu 1 for one core. Beside the
// mean it reports the median wall time of a call (p50-ns/op), which a few
// calls slowed by other work on a shared machine move less.
func BenchmarkEmbedQuery(b *testing.B) {
	m := mustDefault(b)
	b.ReportMetric(float64(len(m.Tokenizer().Encode(query20))), "pieces")
	var took []time.Duration
	start := cpuNow()
	for b.Loop() {
		t0 := time.Now()
		m.Embed([]string{query20})
		took = append(took, time.Since(t0))
	}
	reportCPU(b, start, len(took))
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2]), "p50-ns/op")
}

// BenchmarkEmbedMessages is indexing: batches of chat messages (about 25
// words each) embedded together; it reports messages per second.
func BenchmarkEmbedMessages(b *testing.B) {
	m := mustDefault(b)
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			texts := make([]string, batch)
			for i := range texts {
				texts[i] = fmt.Sprintf("Message %d: we talked about the trip to the mountains and how the kids loved the cabin, next time we want to stay longer.", i)
			}
			n, start := 0, cpuNow()
			for b.Loop() {
				m.Embed(texts)
				n += batch
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
			if cpu := cpuNow() - start; cpu > 0 {
				b.ReportMetric(float64(n)/cpu.Seconds(), "msgs/cpu-s")
			}
		})
	}
}

// BenchmarkTokenize is the tokenizer alone on the 20-word query.
func BenchmarkTokenize(b *testing.B) {
	tok := mustDefault(b).Tokenizer()
	start, n := cpuNow(), 0
	for b.Loop() {
		tok.Encode(query20)
		n++
	}
	reportCPU(b, start, n)
}

// BenchmarkEmbedQueryOn is BenchmarkEmbedQuery split over every core
// (GOMAXPROCS), as a query on an idle encoder runs: its wall time falls,
// its CPU per op (cpu-ns/op) says what the split costs.
func BenchmarkEmbedQueryOn(b *testing.B) {
	m := mustDefault(b)
	var took []time.Duration
	start := cpuNow()
	for b.Loop() {
		t0 := time.Now()
		m.EmbedOn([]string{query20}, runtime.GOMAXPROCS(0))
		took = append(took, time.Since(t0))
	}
	reportCPU(b, start, len(took))
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2]), "p50-ns/op")
}
