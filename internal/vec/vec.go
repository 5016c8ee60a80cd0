// Package vec holds the arithmetic of embedding vectors that must be fast:
// a float32 dot product summed in SIMD blocks where the CPU has them.
package vec

// Dot returns a·b over the first len(a) elements, summed in float32; len(b)
// must be at least len(a). Blocks of 16 elements are summed in SIMD on
// amd64 (four 4-lane sums), the rest in order. The result's error is at
// most len(a)·2⁻²⁴·Σ|aᵢbᵢ| (apart from underflow), as for any float32 sum
// of float32 products.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	n := len(a) &^ 15
	var s float32
	if n > 0 {
		s = dotBlocks(a[:n], b[:n])
	}
	for i := n; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

// Dots sets out[j] to Dot(a, bs[j·len(a):(j+1)·len(a)]) for each j < len(out),
// to the bit (the same sums in the same order), in one call: a's products
// with many rows laid out one after another. bs must hold len(out)·len(a)
// elements.
func Dots(a, bs, out []float32) {
	m := len(a)
	bs = bs[:len(out)*m]
	n := m &^ 15
	if n == m {
		if m > 0 {
			dotsBlocks(a, bs, out)
		} else {
			clear(out)
		}
		return
	}
	for j := range out {
		out[j] = Dot(a, bs[j*m:(j+1)*m])
	}
}
