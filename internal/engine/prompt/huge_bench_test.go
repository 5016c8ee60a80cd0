package prompt

import (
	"context"
	"testing"
)

// BenchmarkPrepareHugeHistory measures Prepare (load and assembly) of a
// full-history client's request resending 60,000 tiny messages
// (hugeAssembler: the default budget and shares, a summary and a pinned
// fact), with a warm token counter.
func BenchmarkPrepareHugeHistory(b *testing.B) {
	a, _ := hugeAssembler(b)
	req := chatOf(b, 60000)(60000, "and now?")
	ctx := context.Background()
	if _, err := a.Prepare(ctx, req); err != nil { // warm the counter
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		if _, err := a.Prepare(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
