package encoder

// scratch is the working memory of one Embed call: its matrices are carved
// in turn from one buffer, which the next call reuses (Model pools them).
// Without it a call allocated about 38 KB per piece (38 MB for an indexing
// batch of eight long messages), garbage the collector had to catch up
// with under load.
type scratch struct {
	buf []float32
	off int
}

// Floats a chunk's computation carves from its scratch (see embedIDs):
// per piece (the input; the first layer's projections, attention, output,
// norm and feed-forward; the second's norm, projections, attention,
// output, norm and feed-forward), per text (the means, pooled and tanh
// rows), and the attention scores of both layers (at most chunkRows² each,
// a chunk holding at most chunkRows pieces).
const (
	pieceFloats = embedDims + 3*embedDims + Dims + embedDims + Dims + Dims + ffnDims +
		Dims + 3*Dims + Dims + Dims + Dims + ffnDims
	textFloats  = Dims + ffnDims + Dims + Dims
	scoreFloats = 2 * chunkRows * chunkRows
)

// reset readies s for a chunk of pieces pieces in texts texts, growing its
// buffer to hold all of the chunk's matrices.
func (s *scratch) reset(pieces, texts int) {
	s.off = 0
	// Each matrix may start up to align floats on: a chunk carves 17 and
	// two score matrices a text.
	if need := pieces*pieceFloats + texts*(textFloats+2*align) + scoreFloats + 17*align; len(s.buf) < need {
		s.buf = make([]float32, need)
	}
}

// matrix returns a zeroed rows×cols matrix from s, starting on a multiple
// of align floats. Past the buffer's end (a chunk larger than reset was
// told) it allocates.
func (s *scratch) matrix(rows, cols int) matrix {
	n := rows * cols
	start := (s.off + align - 1) / align * align
	if start+n > len(s.buf) {
		return newMatrix(rows, cols)
	}
	d := s.buf[start : start+n : start+n]
	s.off = start + n
	clear(d)
	return matrix{rows: rows, cols: cols, data: d}
}

// align is where scratch matrices start (64 bytes): gonum's vector kernels
// add up a dot product's head in a different order when it is not
// aligned, and a text's vector must not depend on where its rows fell
// (TestEmbedIgnoresEarlierCalls holds it to the bit).
const align = 16
