package encoder

// weights is where a model keeps its tensors. Each tensor of at least
// offHeapBytes lives in memory mapped from the operating system, outside
// the Go heap, and is made read-only once the model is built; smaller ones
// (biases, scales) live on the heap.
//
// The model's ~66 MB of weights and tables are live for the whole process.
// On the Go heap they would count in the collector's goal (the next
// collection starts when the heap has grown by GOGC % of what is live), so
// a busy gateway would let another ~66 MB of garbage pile up before
// collecting: memory held for nothing. Mapped, they are resident once and
// the heap's goal is set by the gateway's own data. They hold float32s
// only, never a pointer the collector would need to see. Where mapping is
// not available (or fails) every tensor is on the heap, as before.
type weights struct {
	maps [][]byte // the mappings made, each one tensor's
}

// offHeapBytes is the least size of a tensor mapped outside the heap: a
// smaller one would waste most of its page.
const offHeapBytes = 64 << 10

// floats returns zeroed storage for n float32 values.
func (w *weights) floats(n int) []float32 {
	if 4*n >= offHeapBytes {
		if f, b, ok := mapFloats(n); ok {
			w.maps = append(w.maps, b)
			return f
		}
	}
	return make([]float32, n)
}

// matrix returns a zeroed rows×cols matrix from w.
func (w *weights) matrix(rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, data: w.floats(rows * cols)}
}

// seal makes every mapped tensor read-only: a write to a finished model's
// weights faults instead of silently changing every later vector.
func (w *weights) seal() error {
	for _, b := range w.maps {
		if err := protectMapping(b); err != nil {
			return err
		}
	}
	return nil
}

// releaseMappings returns maps to the operating system; their tensors must
// be unreachable. It is the cleanup of a model (runtime.AddCleanup).
func releaseMappings(maps [][]byte) {
	for _, b := range maps {
		unmapMapping(b)
	}
}
