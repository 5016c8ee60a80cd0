package sqlitestore

// dotBlocks is q·y over the first len(q)&^15 elements, in SSE (dot_amd64.s).
// len(y) must be at least len(q)&^15.
//
//go:noescape
func dotBlocks(q, y []float32) float32
