//go:build !amd64

package vec

// dotBlocks is a·b over the first len(a)&^15 elements.
func dotBlocks(a, b []float32) float32 { return dotBlocksGeneric(a, b) }

// dotsBlocks sets out[j] to dotBlocks(a, bs[j·len(a):]) for each j.
func dotsBlocks(a, bs, out []float32) { dotsBlocksGeneric(a, bs, out) }
