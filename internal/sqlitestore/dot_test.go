package sqlitestore

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot compares dot with a float64 reference at lengths around the
// 16-element blocks, with y longer than q as the vector cache passes it.
func TestDot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 15, 16, 17, 31, 32, 33, 100, 384, 1536} {
		q := make([]float32, n)
		y := make([]float32, n+5)
		for i := range q {
			q[i] = float32(r.NormFloat64())
		}
		for i := range y {
			y[i] = float32(r.NormFloat64())
		}
		var want, mag float64
		for i := range q {
			want += float64(q[i]) * float64(y[i])
			mag += math.Abs(float64(q[i]) * float64(y[i]))
		}
		got := float64(dot(q, y))
		if math.Abs(got-want) > 1e-5*(mag+1) {
			t.Errorf("dot over %d = %v, want %v", n, got, want)
		}
	}
}

func BenchmarkDot384(b *testing.B) {
	q := make([]float32, 384)
	y := make([]float32, 384)
	for i := range q {
		q[i], y[i] = float32(i%7), float32(i%5)
	}
	var s float32
	for b.Loop() {
		s += dot(q, y)
	}
	_ = s
}
