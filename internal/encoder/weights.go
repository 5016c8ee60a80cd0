package encoder

import (
	"unsafe"

	"github.com/x448/float16"
)

// weights is where a model keeps its tensors. Each tensor of at least
// offHeapBytes lives in memory mapped from the operating system, outside
// the Go heap, and is made read-only once the model is built; smaller ones
// (biases, scales) live on the heap.
//
// The model's ~44 MB of weights and tables are live for the whole process.
// On the Go heap they would count in the collector's goal (the next
// collection starts when the heap has grown by GOGC % of what is live), so
// a busy gateway would let another ~44 MB of garbage pile up before
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
	if b := w.mapped(4 * n); b != nil {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	return make([]float32, n)
}

// bytes returns zeroed storage for n bytes.
func (w *weights) bytes(n int) []byte {
	if b := w.mapped(n); b != nil {
		return b
	}
	return make([]byte, n)
}

// halves returns zeroed storage for n half floats.
func (w *weights) halves(n int) []uint16 {
	if b := w.mapped(2 * n); b != nil {
		return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	return make([]uint16, n)
}

// mapped returns n mapped bytes, or nil when n is under offHeapBytes or
// the system refuses.
func (w *weights) mapped(n int) []byte {
	if n < offHeapBytes {
		return nil
	}
	b, ok := mapBytes(n)
	if !ok {
		return nil
	}
	w.maps = append(w.maps, b)
	return b
}

// matrix returns a zeroed rows×cols matrix from w.
func (w *weights) matrix(rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, data: w.floats(rows * cols)}
}

// halfMatrix returns a zeroed rows×cols half-float matrix from w.
func (w *weights) halfMatrix(rows, cols int) halfMatrix {
	return halfMatrix{rows: rows, cols: cols, data: w.halves(rows * cols)}
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

// halfMatrix is a dense row-major matrix of IEEE half floats: the tables
// read a row at a time per piece (the embeddings, the first layer's
// projections of them), where half precision changes no vector measurably
// (worst golden cosine 0.999597 → 0.999596) and halves their 49 MB.
type halfMatrix struct {
	rows, cols int
	data       []uint16
}

func (m halfMatrix) row(i int) []uint16 { return m.data[i*m.cols : (i+1)*m.cols] }

// toHalf returns m rounded to half floats in storage from w.
func toHalf(w *weights, m matrix) halfMatrix {
	h := w.halfMatrix(m.rows, m.cols)
	putHalves(h.data, m.data)
	return h
}

// putHalves writes src rounded to half floats into dst.
func putHalves(dst []uint16, src []float32) {
	for i, v := range src {
		dst[i] = float16.Fromfloat32(v).Bits()
	}
}

// half returns the float32 of half-float bits.
func half(b uint16) float32 { return float16.Frombits(b).Float32() }
