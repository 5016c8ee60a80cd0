package recall

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/vec"
)

// Dedup walks items in order and keeps each one whose normalised text
// (lower case, punctuation dropped) differs from every kept item's and whose
// embedding has a cosine similarity of at most 0.95 with every kept item's,
// until limit are kept (limit <= 0: no limit). Similarities are those of
// Cosine: the kept set is the one comparing with Cosine would give, only
// found faster (see nearDup).
func Dedup(items []memory.Item, limit int) []memory.Item {
	n := len(items)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]memory.Item, 0, n)
	norms := make([]vecNorm, 0, n) // norms[i] is out[i]'s
	seen := make(map[string]bool, n)
	for _, it := range items {
		if limit > 0 && len(out) >= limit {
			break
		}
		t := normText(it.Text)
		if seen[t] {
			continue
		}
		var nv vecNorm
		if len(it.Embedding) > 0 {
			nv = normOf(it.Embedding)
		}
		dup := false
		for i, k := range out {
			if len(k.Embedding) > 0 && len(k.Embedding) == len(it.Embedding) && nearDup(k.Embedding, it.Embedding, norms[i], nv) {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		seen[t] = true
		out = append(out, it)
		norms = append(norms, nv)
	}
	return out
}

// Squared norms outside [minSqNorm, maxSqNorm] (or not numbers) leave
// nearDup to Cosine: there float32 sums could underflow or overflow.
const (
	minSqNorm = 1e-30
	maxSqNorm = 1e30
)

// vecNorm is what nearDup needs of a vector's norm: 1/|v|, and whether the
// float32 dot product's error bound holds for it (fast).
type vecNorm struct {
	inv  float64
	fast bool
}

// normOf returns v's vecNorm. The squared norm is a float32 sum of
// positive terms (vec.Dot), within a factor 1±n·2⁻²⁴ of the exact one.
func normOf(v []float32) vecNorm {
	sq := float64(vec.Dot(v, v))
	if !(sq >= minSqNorm && sq <= maxSqNorm) { // also NaN
		return vecNorm{}
	}
	return vecNorm{inv: 1 / math.Sqrt(sq), fast: true}
}

// nearDup reports whether Cosine(a, b) > dupCosine, for vectors of equal
// length with norms na and nb (normOf). It estimates the cosine from a
// float32 dot product (vec.Dot, several times faster than Cosine's float64
// sums) and asks Cosine only when the estimate is within the estimate's
// error bound of dupCosine, or the bound does not hold (norms out of range,
// non-finite values), so it answers as Cosine would, always.
//
// The bound, for n = len(a) and u = 2⁻²⁴: vec.Dot errs by at most
// n·u·Σ|aᵢbᵢ| ≤ n·u·|a||b| (Cauchy–Schwarz), so the estimated cosine by
// n·u; the float32 squared norms by a factor 1±n·u each, so the estimate
// by about another n·u; the products' underflow by at most
// n·2⁻¹⁵⁰/(|a||b|) ≤ n·2⁻¹⁵⁰·10³⁰, and the float64 arithmetic by a few
// 2⁻⁵³. The margin n·2⁻²¹ is four times their sum, and also covers
// Cosine's own float64 error: outside it, Cosine answers as the estimate.
func nearDup(a, b []float32, na, nb vecNorm) bool {
	if !na.fast || !nb.fast {
		return Cosine(a, b) > dupCosine
	}
	c := float64(vec.Dot(a, b)) * na.inv * nb.inv
	if margin := float64(len(a)) * 0x1p-21; math.Abs(c-dupCosine) <= margin || math.IsNaN(c) {
		return Cosine(a, b) > dupCosine
	}
	return c > dupCosine
}

// normText is a passage's text for duplicate detection: lower case, words
// of letters and digits, single spaces: strings.Join(tokenize(s), " ") in
// one pass and one allocation, copying runs of lower-case ASCII letters and
// digits whole.
func normText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	inWord := false
	// word starts or continues a word: a space first if it starts one.
	word := func() {
		if !inWord && b.Len() > 0 {
			b.WriteByte(' ')
		}
		inWord = true
	}
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && (s[j]-'a' < 26 || s[j]-'0' < 10) {
			j++
		}
		if j > i {
			word()
			b.WriteString(s[i:j])
			i = j
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if c-'A' < 26 {
				word()
				b.WriteByte(c + 'a' - 'A')
			} else {
				inWord = false
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r = unicode.ToLower(r); unicode.IsLetter(r) || unicode.IsDigit(r) {
			word()
			b.WriteRune(r)
		} else {
			inWord = false
		}
	}
	return b.String()
}
