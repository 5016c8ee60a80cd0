package vec

// dotBlocks is a·b over the first len(a)&^15 elements, in SSE (dot_amd64.s).
// len(b) must be at least len(a)&^15.
//
//go:noescape
func dotBlocks(a, b []float32) float32
