package vec

import (
	"encoding/binary"
	"math"
)

// CosineBytes is the cosine similarity of q (of length qnorm) and a
// little-endian float32 vector as the SQLite store keeps it, read in
// place. ok is false when the stored vector has another length or no
// length at all.
func CosineBytes(q []float32, qnorm float64, b []byte) (score float64, ok bool) {
	if len(b) != 4*len(q) {
		return 0, false
	}
	// Four independent sums per quantity let the loads and multiplies of
	// neighbouring elements overlap.
	var d0, d1, d2, d3, v0, v1, v2, v3 float32
	i := 0
	for ; i+4 <= len(q); i += 4 {
		w := b[4*i : 4*i+16 : 4*i+16]
		qs := q[i : i+4 : i+4]
		y0 := math.Float32frombits(binary.LittleEndian.Uint32(w[0:]))
		y1 := math.Float32frombits(binary.LittleEndian.Uint32(w[4:]))
		y2 := math.Float32frombits(binary.LittleEndian.Uint32(w[8:]))
		y3 := math.Float32frombits(binary.LittleEndian.Uint32(w[12:]))
		d0, d1, d2, d3 = d0+qs[0]*y0, d1+qs[1]*y1, d2+qs[2]*y2, d3+qs[3]*y3
		v0, v1, v2, v3 = v0+y0*y0, v1+y1*y1, v2+y2*y2, v3+y3*y3
	}
	for ; i < len(q); i++ {
		y := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		d0 += q[i] * y
		v0 += y * y
	}
	dot, vv := (d0+d1)+(d2+d3), (v0+v1)+(v2+v3)
	if vv == 0 {
		return 0, false
	}
	return float64(dot) / (qnorm * math.Sqrt(float64(vv))), true
}
