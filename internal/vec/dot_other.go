//go:build !amd64

package vec

// dotBlocks is a·b over the first len(a)&^15 elements.
func dotBlocks(a, b []float32) float32 { return dotBlocksGeneric(a, b) }
