package encoder

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/x448/float16"
)

// AssetMagic opens the model asset (after gzip), naming its format.
const AssetMagic = "memgate-use-lite 1\n"

// How a tensor's values are stored in the asset.
const (
	// KindF32 is little-endian float32s.
	KindF32 = 0
	// KindF16 is little-endian IEEE half floats.
	KindF16 = 1
	// KindInt8 is one float32 scale per QuantGroup consecutive values
	// (row-major), then the int8 values (value = int8 × its group's scale).
	KindInt8 = 2
)

// QuantGroup is how many consecutive values of an int8 tensor share a
// scale. Measured on the golden set (worst cosine with the float32
// reference): one scale per row 0.9988, per 64 values 0.9993, per 32
// 0.9996 for a 7.6 MB asset (float16: 1.0000 for 13 MB).
const QuantGroup = 32

// ToFloat16 returns the IEEE half-float bits nearest to v (the generator's
// -quant f16).
func ToFloat16(v float32) uint16 { return float16.Fromfloat32(v).Bits() }

// matrix is a dense row-major matrix of float32.
type matrix struct {
	rows, cols int
	data       []float32
}

// asset is the parsed model file: the vocabulary, and the tensors by name,
// still encoded (tensor.decode writes one's values where the model keeps
// them).
type asset struct {
	pieces  []string
	scores  []float64
	tensors map[string]tensor
}

// tensor is one encoded tensor of the asset: its shape, its kind and its
// bytes (for KindInt8, the scales then the values).
type tensor struct {
	rows, cols int
	kind       uint8
	data       []byte
}

// decode writes t's rows×cols values into dst as float32.
func (t tensor) decode(dst []float32) {
	switch t.kind {
	case KindF32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.data[4*i:]))
		}
	case KindF16:
		for i := range dst {
			dst[i] = float16.Frombits(binary.LittleEndian.Uint16(t.data[2*i:])).Float32()
		}
	case KindInt8:
		vals := t.data[4*quantGroups(len(dst)):]
		for i := range dst {
			scale := math.Float32frombits(binary.LittleEndian.Uint32(t.data[4*(i/QuantGroup):]))
			dst[i] = float32(int8(vals[i])) * scale
		}
	}
}

// quantGroups is how many scales an int8 tensor of n values has.
func quantGroups(n int) int { return (n + QuantGroup - 1) / QuantGroup }

// maxAsset bounds an asset's size unzipped (the model's is 8 MB).
const maxAsset = 1 << 28

// errAsset reports a malformed asset.
var errAsset = errors.New("encoder: malformed model asset")

// decodeAsset reads the gzip'd asset (see gen): the magic, the vocabulary
// (count; per piece its byte length, bytes and float64 score), then the
// tensors (count; per tensor its name, kind, rows, columns and values).
// It checks every tensor's length and leaves the values encoded, in the
// unzipped bytes, which it takes from alloc: the asset's pieces and scores
// are copies, its tensors are not.
func decodeAsset(gz []byte, alloc func(n int) []byte) (*asset, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errAsset, err)
	}
	// The gzip trailer's last four bytes are the size unzipped (mod 2³²,
	// checked by the reader at the end along with the checksum): the
	// asset unzips into storage of that size from alloc.
	if len(gz) < 4 {
		return nil, fmt.Errorf("%w: too short", errAsset)
	}
	size := binary.LittleEndian.Uint32(gz[len(gz)-4:])
	if size > maxAsset {
		return nil, fmt.Errorf("%w: %d bytes unzipped", errAsset, size)
	}
	raw := alloc(int(size))
	if _, err := io.ReadFull(zr, raw); err != nil {
		return nil, fmt.Errorf("%w: %w", errAsset, err)
	}
	if n, err := zr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return nil, fmt.Errorf("%w: more than its stated size, or a bad checksum (%v)", errAsset, err)
	}
	r := &reader{b: raw}
	if string(r.next(len(AssetMagic))) != AssetMagic {
		return nil, fmt.Errorf("%w: bad magic", errAsset)
	}
	a := &asset{tensors: map[string]tensor{}}
	n := int(r.u32())
	if n > 1<<20 {
		return nil, fmt.Errorf("%w: %d pieces", errAsset, n)
	}
	a.pieces = make([]string, 0, n)
	a.scores = make([]float64, 0, n)
	for range n {
		p := string(r.next(int(r.u16())))
		a.pieces = append(a.pieces, p)
		a.scores = append(a.scores, math.Float64frombits(r.u64()))
	}
	nt := int(r.u32())
	for range nt {
		if r.err != nil {
			break
		}
		name := string(r.next(int(r.u8())))
		t := tensor{kind: r.u8()}
		t.rows, t.cols = int(r.u32()), int(r.u32())
		if t.rows <= 0 || t.cols <= 0 || t.rows*t.cols > 1<<26 {
			return nil, fmt.Errorf("%w: tensor %q is %d×%d", errAsset, name, t.rows, t.cols)
		}
		size := t.rows * t.cols
		switch t.kind {
		case KindF32:
			t.data = r.next(4 * size)
		case KindF16:
			t.data = r.next(2 * size)
		case KindInt8:
			t.data = r.next(4*quantGroups(size) + size)
		default:
			return nil, fmt.Errorf("%w: tensor %q of kind %d", errAsset, name, t.kind)
		}
		a.tensors[name] = t
	}
	if r.err != nil || r.off != len(raw) {
		return nil, fmt.Errorf("%w: truncated or trailing bytes", errAsset)
	}
	return a, nil
}

// reader reads little-endian values; past the end it records err and
// returns zeros.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) next(n int) []byte {
	if r.err != nil || n < 0 || r.off+n > len(r.b) {
		r.err = errAsset
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u8() uint8 {
	if b := r.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.next(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
