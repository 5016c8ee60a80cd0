package recall

import (
	"testing"
	"time"
)

// reportCPU reports the process's CPU time (user and system, GC workers
// included) per op of b since start (cpuNow): on a machine shared with
// other benchmarks it varies less than the wall time.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op")
}
