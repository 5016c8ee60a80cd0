package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot compares Dot with a float64 reference at lengths around the
// 16-element blocks, with b longer than a, against the documented bound.
func TestDot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 15, 16, 17, 31, 32, 33, 100, 384, 1536, 3072} {
		for _, scale := range []float64{1, 1e-3, 1e6} {
			a := make([]float32, n)
			b := make([]float32, n+5)
			for i := range a {
				a[i] = float32(r.NormFloat64() * scale)
			}
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			var want, mag float64
			for i := range a {
				want += float64(a[i]) * float64(b[i])
				mag += math.Abs(float64(a[i]) * float64(b[i]))
			}
			got := float64(Dot(a, b))
			if bound := float64(n) * 0x1p-24 * mag; math.Abs(got-want) > bound {
				t.Errorf("Dot over %d (scale %g) = %v, want %v within %g", n, scale, got, want, bound)
			}
		}
	}
}

// TestDotExact checks sums that float32 holds exactly, so any order of
// addition must give them: small integers.
func TestDotExact(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 48, 384, 385} {
		a := make([]float32, n)
		b := make([]float32, n)
		want := float32(0)
		for i := range a {
			a[i], b[i] = float32(i%7-3), float32(i%5-2)
			want += a[i] * b[i]
		}
		if got := Dot(a, b); got != want {
			t.Errorf("Dot over %d = %v, want %v", n, got, want)
		}
	}
}

// TestDotBlocksGeneric checks that the Go blocks give the assembly's bits,
// so every architecture computes the same dot product.
func TestDotBlocksGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 16, 32, 48, 384, 1536} {
		for range 20 {
			a := make([]float32, n)
			b := make([]float32, n)
			for i := range a {
				a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			got, want := dotBlocks(a, b), dotBlocksGeneric(a, b)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("dotBlocks over %d = %v, generic %v", n, got, want)
			}
		}
	}
}

func BenchmarkDot384(b *testing.B) {
	x := make([]float32, 384)
	y := make([]float32, 384)
	for i := range x {
		x[i], y[i] = float32(i%7), float32(i%5)
	}
	var s float32
	for b.Loop() {
		s += Dot(x, y)
	}
	_ = s
}

// TestDots checks Dots against Dot, to the bit, at lengths on and off the
// 16-element blocks, and dotsBlocks against its Go version.
func TestDots(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, m := range []int{0, 1, 15, 16, 17, 48, 64, 100, 384} {
		for _, rows := range []int{0, 1, 2, 7, 81} {
			a := make([]float32, m)
			bs := make([]float32, rows*m+3)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			for i := range bs {
				bs[i] = float32(r.NormFloat64())
			}
			out := make([]float32, rows)
			for i := range out {
				out[i] = 42
			}
			Dots(a, bs, out)
			for j := range out {
				if want := Dot(a, bs[j*m:(j+1)*m]); math.Float32bits(out[j]) != math.Float32bits(want) {
					t.Fatalf("Dots over %d, row %d of %d = %v, Dot %v", m, j, rows, out[j], want)
				}
			}
			if m%16 == 0 {
				gen := make([]float32, rows)
				dotsBlocksGeneric(a, bs, gen)
				for j := range gen {
					if math.Float32bits(gen[j]) != math.Float32bits(out[j]) {
						t.Fatalf("dotsBlocksGeneric over %d, row %d = %v, dotsBlocks %v", m, j, gen[j], out[j])
					}
				}
			}
		}
	}
}

// BenchmarkDots measures a 384-dimension query against 1,200 rows: one
// Dots call, and a Dot per row.
func BenchmarkDots(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	const m, rows = 384, 1200
	a := make([]float32, m)
	bs := make([]float32, m*rows)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range bs {
		bs[i] = float32(r.NormFloat64())
	}
	out := make([]float32, rows)
	b.Run("Dots", func(b *testing.B) {
		for b.Loop() {
			Dots(a, bs, out)
		}
	})
	b.Run("Dot", func(b *testing.B) {
		for b.Loop() {
			for j := range out {
				out[j] = Dot(a, bs[j*m:(j+1)*m])
			}
		}
	})
}
