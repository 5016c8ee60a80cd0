package vec

// dotBlocks is a·b over the first len(a)&^15 elements, in SSE (dot_amd64.s).
// len(b) must be at least len(a)&^15.
//
//go:noescape
func dotBlocks(a, b []float32) float32

// dotsBlocks sets out[j] to dotBlocks(a, bs[j·len(a):]) for each j, in SSE
// (dot_amd64.s). len(a) must be a multiple of 16 and bs at least
// len(out)·len(a) long.
//
//go:noescape
func dotsBlocks(a, bs, out []float32)
