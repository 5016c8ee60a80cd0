//go:build !amd64

package sqlitestore

// dotBlocks is q·y over the first len(q)&^15 elements.
func dotBlocks(q, y []float32) float32 {
	n := len(q) &^ 15
	y = y[:n]
	var d0, d1, d2, d3 float32
	for i := 0; i < n; i += 4 {
		qs, ys := q[i:i+4:i+4], y[i:i+4:i+4]
		d0, d1, d2, d3 = d0+qs[0]*ys[0], d1+qs[1]*ys[1], d2+qs[2]*ys[2], d3+qs[3]*ys[3]
	}
	return (d0 + d1) + (d2 + d3)
}
