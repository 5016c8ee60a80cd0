package vec

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestCosineBytes compares CosineBytes with the cosine computed in float64
// over vectors of lengths around its blocks of four, and checks it refuses
// a stored vector of another length or of no length.
func TestCosineBytes(t *testing.T) {
	enc := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	for _, n := range []int{1, 3, 4, 5, 8, 9, 384} {
		q, y := make([]float32, n), make([]float32, n)
		var dot, qq, yy float64
		for i := range q {
			q[i], y[i] = float32(i%7)-3, float32(i%5)+0.5
			dot += float64(q[i]) * float64(y[i])
			qq += float64(q[i]) * float64(q[i])
			yy += float64(y[i]) * float64(y[i])
		}
		qnorm := math.Sqrt(qq)
		got, ok := CosineBytes(q, qnorm, enc(y))
		if want := dot / (qnorm * math.Sqrt(yy)); !ok || math.Abs(got-want) > 1e-5 {
			t.Errorf("CosineBytes over %d = %v, %v, want %v", n, got, ok, want)
		}
		if _, ok := CosineBytes(q, qnorm, enc(y[:n-1])); ok {
			t.Errorf("CosineBytes over %d accepted a vector of %d", n, n-1)
		}
		if _, ok := CosineBytes(q, qnorm, enc(make([]float32, n))); ok {
			t.Errorf("CosineBytes over %d accepted a zero vector", n)
		}
	}
}
