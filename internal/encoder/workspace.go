package encoder

// workspace is the scratch memory of one Embed call: the intermediate
// matrices of a call are cut from one slab, which later calls reuse
// through the model's pool, so a call allocates little but its vectors.
// A call that needs more than the slab holds gets the rest from the heap,
// and the next call finds a slab of the size it needed.
type workspace struct {
	slab []float32
	used int // values of slab handed out in this call
	need int // values asked for in this call
}

// reset starts a call: everything handed out before is free again.
func (w *workspace) reset() {
	if w.need > len(w.slab) {
		w.slab = make([]float32, w.need)
	}
	w.used, w.need = 0, 0
}

// matrix returns a rows×cols matrix valid until the next reset, holding
// whatever an earlier call left there: for results that overwrite every
// value (linear, layerNorm, a gemm with beta 0).
func (w *workspace) matrix(rows, cols int) matrix {
	n := rows * cols
	w.need += n
	if w.used+n > len(w.slab) {
		return newMatrix(rows, cols)
	}
	data := w.slab[w.used : w.used+n : w.used+n]
	w.used += n
	return matrix{rows: rows, cols: cols, data: data}
}

// zeros is matrix, zeroed: for sums.
func (w *workspace) zeros(rows, cols int) matrix {
	m := w.matrix(rows, cols)
	clear(m.data)
	return m
}
