package vec

// dotBlocksGeneric is dotBlocks in Go: a·b over the first len(a)&^15
// elements, in the same sixteen running sums, added in the same order, as
// the amd64 assembly, so both give the same bits. The explicit float32
// conversion keeps the compiler from fusing a multiply and an add.
func dotBlocksGeneric(a, b []float32) float32 {
	n := len(a) &^ 15
	b = b[:n]
	var s [16]float32
	for i := 0; i < n; i += 16 {
		as, bs := a[i:i+16:i+16], b[i:i+16:i+16]
		for j := range s {
			s[j] += float32(as[j] * bs[j])
		}
	}
	var lanes [4]float32
	for j := range lanes {
		lanes[j] = (s[j] + s[4+j]) + (s[8+j] + s[12+j])
	}
	return (lanes[0] + lanes[2]) + (lanes[1] + lanes[3])
}

// dotsBlocksGeneric is dotsBlocks in Go.
func dotsBlocksGeneric(a, bs, out []float32) {
	n := len(a)
	for j := range out {
		out[j] = dotBlocksGeneric(a, bs[j*n:(j+1)*n])
	}
}
