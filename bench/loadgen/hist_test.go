package loadgen

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	tests := []struct {
		name   string
		values func(r *rand.Rand) []time.Duration
	}{
		{"uniform µs", func(r *rand.Rand) []time.Duration {
			out := make([]time.Duration, 50000)
			for i := range out {
				out[i] = time.Duration(r.Int64N(int64(10 * time.Millisecond)))
			}
			return out
		}},
		{"long tail", func(r *rand.Rand) []time.Duration {
			out := make([]time.Duration, 50000)
			for i := range out {
				out[i] = time.Duration(r.ExpFloat64() * float64(200*time.Microsecond))
			}
			return out
		}},
		{"small exact", func(r *rand.Rand) []time.Duration {
			out := make([]time.Duration, 1000)
			for i := range out {
				out[i] = time.Duration(r.IntN(200))
			}
			return out
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := tt.values(rand.New(rand.NewPCG(1, 2)))
			h := NewHistogram()
			for _, v := range vals {
				h.Record(v)
			}
			slices.Sort(vals)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
				idx := int(float64(len(vals))*q+0.999999) - 1
				want := vals[max(idx, 0)]
				got := h.Quantile(q)
				if diff := got - want; diff < 0 && -diff > want/100+1 || diff > 0 && diff > want/100+1 {
					t.Errorf("q%v = %v, want %v ±1%%", q, got, want)
				}
			}
			if h.Count() != uint64(len(vals)) || h.Max() != vals[len(vals)-1] || h.Min() != vals[0] {
				t.Errorf("count/min/max = %d/%v/%v, want %d/%v/%v", h.Count(), h.Min(), h.Max(), len(vals), vals[0], vals[len(vals)-1])
			}
		})
	}
}

func TestHistogramMergeAndEdges(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	if a.Quantile(0.5) != 0 || a.Mean() != 0 || a.Min() != 0 {
		t.Fatal("empty histogram must report zeros")
	}
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	b.Record(-time.Second) // clamped to zero
	b.Record(time.Duration(1 << 62))
	a.Merge(b)
	if a.Count() != 4 {
		t.Fatalf("count = %d, want 4", a.Count())
	}
	if a.Min() != 0 || a.Max() != time.Duration(1<<62) {
		t.Errorf("min/max = %v/%v", a.Min(), a.Max())
	}
	if got := a.Quantile(0.5); got < 990*time.Microsecond || got > 1010*time.Microsecond {
		t.Errorf("median = %v, want ≈1ms", got)
	}
}

func TestBucketRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 255, 256, 257, 1000, 123456, 1 << 40, 1<<62 + 12345} {
		mid := bucketMid(bucketOf(v))
		if d := mid - v; d > v/128+1 || -d > v/128+1 {
			t.Errorf("value %d lands in a bucket with midpoint %d", v, mid)
		}
	}
	if got := bucketOf(1<<63 - 1); got >= numBuckets {
		t.Errorf("largest value bucket %d out of range %d", got, numBuckets)
	}
}
