package encoder

// The first layer's two projections of its input, precomputed.
//
// A piece's input row is x = 2e + t: its embedding e (twice, as the graph
// adds it) and its position's signal t. The residual projection is linear,
// so resW·x = 2·(resW·e) + resW·t: one row of a table per vocabulary entry
// and one per position. The attention's projection reads the layer norm
// of x, s⊙(x−μ)/σ + β (μ and σ the row's mean and deviation), whose
// product with qkvW is
//
//	(qkvW·diag(s)·x − μ·qkvW·diag(s)·1) / σ + qkvW·β
//
// and qkvW·diag(s)·x splits as the residual does. So both products become
// lookups and a few additions per piece (a tenth of a 20-word query's
// multiplications), for tables computed once at load: 41 MB in float32,
// 21 MB as kept (the vocabulary's rows in half floats, see halfMatrix).

import "math"

// inputTables are the first layer's projections of every vocabulary entry
// and every position (see the file's comment).
type inputTables struct {
	embQKV halfMatrix // vocabulary × 3·256: qkvW·diag(s)·e
	posQKV matrix     // MaxTokens × 3·256: qkvW·diag(s)·t
	sumQKV []float32  // qkvW·diag(s)·1
	bias   []float32  // qkvW·β + qkv bias
	embRes halfMatrix // vocabulary × 512: resW·e
	posRes matrix     // MaxTokens × 512: resW·t + res bias
}

// newInputTables computes, into w, the tables of the first layer l over the
// embeddings emb and the position signal timing; the vocabulary's in half
// floats.
func newInputTables(w *weights, l *layer, emb, timing matrix) inputTables {
	scaled := newMatrix(l.qkvW.rows, l.qkvW.cols)
	for r := range scaled.rows {
		for c, v := range l.qkvW.row(r) {
			scaled.data[r*scaled.cols+c] = v * l.ln1Scale[c]
		}
	}
	t := inputTables{
		embQKV: halfLinear(w, emb, scaled),
		posQKV: linear(1, w.matrix(timing.rows, scaled.rows), timing, scaled, nil),
		sumQKV: w.floats(scaled.rows),
		bias:   w.floats(scaled.rows),
		embRes: halfLinear(w, emb, l.resW),
		posRes: linear(1, w.matrix(timing.rows, l.resW.rows), timing, l.resW, l.resB),
	}
	for r := range scaled.rows {
		var sum, bias float64
		for c, w := range scaled.row(r) {
			sum += float64(w)
			bias += float64(l.qkvW.data[r*l.qkvW.cols+c]) * float64(l.ln1Bias[c])
		}
		t.sumQKV[r] = float32(sum)
		t.bias[r] = float32(bias) + l.qkvB[r]
	}
	return t
}

// project returns, for the pieces ids laid out in spans, the first layer's
// attention projection (rows × 3·256: q, k, v) and its residual projection
// (rows × 512), computed on s. x holds the pieces' input rows.
func (t *inputTables) project(s *scratch, ids [][]int, spans [][2]int, x matrix) (qkv, res matrix) {
	qkv = s.matrix(x.rows, t.embQKV.cols)
	res = s.matrix(x.rows, t.embRes.cols)
	n := float32(x.cols)
	for i, s := range ids {
		for p, id := range s {
			r := spans[i][0] + p
			in := x.row(r)
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
			q, e, ps := qkv.row(r), t.embQKV.row(id), t.posQKV.row(p)
			for j := range q {
				e := half(e[j])
				q[j] = (e+e+ps[j]-mean*t.sumQKV[j])*inv + t.bias[j]
			}
			o, e, ps := res.row(r), t.embRes.row(id), t.posRes.row(p)
			for j := range o {
				e := half(e[j])
				o[j] = e + e + ps[j]
			}
		}
	}
	return qkv, res
}

// halfLinear returns x·wtᵀ in half floats from w, computed a block of rows
// at a time so the load never holds the whole product in float32.
func halfLinear(w *weights, x, wt matrix) halfMatrix {
	const block = 256
	out := w.halfMatrix(x.rows, wt.rows)
	buf := make([]float32, block*wt.rows)
	for r := 0; r < x.rows; r += block {
		rows := min(block, x.rows-r)
		in := matrix{rows: rows, cols: x.cols, data: x.data[r*x.cols : (r+rows)*x.cols]}
		p := matrix{rows: rows, cols: wt.rows, data: buf[:rows*wt.rows]}
		clear(p.data)
		linear(1, p, in, wt, nil)
		putHalves(out.data[r*out.cols:], p.data)
	}
	return out
}
