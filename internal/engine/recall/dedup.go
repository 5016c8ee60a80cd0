package recall

import (
	"bytes"
	"hash/maphash"
	"math"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/vec"
)

// dedupScratch is the working space of one dedup at a time, kept between
// a Searcher's searches (see Searcher.scratch): a recall's dedup otherwise
// allocated some 60 KB.
type dedupScratch struct {
	seed  maphash.Seed
	texts []byte           // the kept items' normalised texts, one after another
	ends  []int32          // ends[i] is where kept item i's text ends in texts
	seen  map[uint64]int32 // by a text's hash, the last kept item with it
	prev  []int32          // prev[i], the kept item before i with its hash (-1: none)
	buf   []byte           // a candidate's normalised text
	embs  [][]float32      // embs[i] is kept item i's Embedding
	norms []vecNorm        // norms[i] is its norm
	tails []float64        // the vecNorms' tails, one after another
	// heads holds the first dupChunk dimensions of each kept vector (zeros
	// past a shorter one's end), one after another: a candidate's first
	// products with all of them are one vec.Dots call (see nearDupAfter).
	heads  []float32
	firsts []float32 // a candidate's products with heads
	// messages are the kept messages (conversation, ref): one chunk each.
	messages map[[2]string]bool
}

// newDedupScratch returns space for dedups keeping about n items.
func newDedupScratch(n int) *dedupScratch {
	return &dedupScratch{seed: maphash.MakeSeed(), seen: make(map[uint64]int32, n)}
}

// reset empties d, keeping its space, and forgets the vectors it pointed
// to.
func (d *dedupScratch) reset() {
	clear(d.seen)
	clear(d.embs)
	clear(d.norms)
	d.texts, d.ends, d.prev, d.buf = d.texts[:0], d.ends[:0], d.prev[:0], d.buf[:0]
	d.embs, d.norms, d.tails, d.heads, d.firsts = d.embs[:0], d.norms[:0], d.tails[:0], d.heads[:0], d.firsts[:0]
}

// text returns kept item i's normalised text.
func (d *dedupScratch) text(i int32) []byte {
	start := int32(0)
	if i > 0 {
		start = d.ends[i-1]
	}
	return d.texts[start:d.ends[i]]
}

// dedup walks cands in order and keeps each one whose normalised text
// (lower case, punctuation dropped) differs from every kept one's and whose
// embedding has a cosine similarity of at most 0.95 with every kept one's,
// and, for a message's chunk, whose message has no chunk kept yet, until
// limit are kept (limit <= 0: no limit), in d's space. Similarities
// are those of Cosine: the kept set is the one comparing with Cosine would
// give, only found faster (see nearDup). The items kept come with their
// candidates' scores.
func (d *dedupScratch) dedup(cands []cand, limit int) []memory.Item {
	n := len(cands)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]memory.Item, 0, n)
	d.heads = slices.Grow(d.heads, n*dupChunk)
	d.embs, d.norms = slices.Grow(d.embs, n), slices.Grow(d.norms, n)
	d.ends, d.prev = slices.Grow(d.ends, n), slices.Grow(d.prev, n)
	if cap(d.texts) == 0 { // room for about the first n texts
		size := 0
		for _, c := range cands[:n] {
			size += len(c.it.Text)
		}
		d.texts = make([]byte, 0, size)
	}
	clear(d.messages)
	for _, c := range cands {
		if limit > 0 && len(out) >= limit {
			break
		}
		it := c.it
		if it.Kind == KindMessage && d.messages[[2]string{it.Conversation, it.Ref}] {
			// A recalled message shows once, around its best hit
			// (expand): another chunk of a kept one would take a place
			// and show nothing more.
			continue
		}
		d.buf = appendNormText(d.buf[:0], it.Text)
		h := maphash.Bytes(d.seed, d.buf)
		last, ok := d.seen[h]
		if !ok {
			last = -1
		}
		same := false
		for i := last; i >= 0 && !same; i = d.prev[i] {
			same = bytes.Equal(d.text(i), d.buf)
		}
		if same {
			continue
		}
		mark := len(d.tails)
		var nv vecNorm
		v := it.Embedding
		if len(v) > 0 {
			nv, d.tails = normOf(v, d.tails)
		}
		batched := nv.fast && len(v) > dupChunk && len(d.embs) > 0
		if batched {
			d.firsts = slices.Grow(d.firsts[:0], len(d.embs))[:len(d.embs)]
			vec.Dots(v[:dupChunk], d.heads, d.firsts)
		}
		dup := false
		for i, e := range d.embs {
			if len(e) == 0 || len(e) != len(v) {
				continue
			}
			var near bool
			if na := &d.norms[i]; batched && na.fast {
				var dot float64
				dot += float64(d.firsts[i])
				// nearDupAfter's first test, inline: most pairs end here.
				if (dot+na.tails[1]*nv.tails[1])*(na.inv*nv.inv) < dupCosine-float64(len(v))*0x1p-21 {
					continue
				}
				near = nearDupAfter(e, v, na, &nv, dot)
			} else {
				near = nearDup(e, v, &d.norms[i], &nv)
			}
			if near {
				dup = true
				break
			}
		}
		if dup {
			d.tails = d.tails[:mark] // a slice of an earlier array stays as it is
			continue
		}
		k := int32(len(out))
		d.texts = append(d.texts, d.buf...)
		d.ends = append(d.ends, int32(len(d.texts)))
		d.prev = append(d.prev, last)
		d.seen[h] = k
		out = append(out, *it)
		out[k].Score = c.score
		if it.Kind == KindMessage {
			if d.messages == nil {
				d.messages = make(map[[2]string]bool, n)
			}
			d.messages[[2]string{it.Conversation, it.Ref}] = true
		}
		d.embs = append(d.embs, v)
		d.norms = append(d.norms, nv)
		start := len(d.heads)
		d.heads = append(d.heads, v[:min(len(v), dupChunk)]...)
		d.heads = append(d.heads, make([]float32, dupChunk-(len(d.heads)-start))...)
	}
	return out
}

// Squared norms outside [minSqNorm, maxSqNorm] (or not numbers) leave
// nearDup to Cosine: there float32 sums could underflow or overflow.
const (
	minSqNorm = 1e-30
	maxSqNorm = 1e30
)

// dupChunk is how many dimensions nearDup multiplies before it checks
// whether the rest could still make a pair similar enough.
const dupChunk = 64

// vecNorm is what nearDup needs of a vector v's norm.
type vecNorm struct {
	// tails[k] is the norm of v[k·dupChunk:]; tails[0] is |v|.
	tails []float64
	// inv is 1/|v|.
	inv float64
	// fast reports whether the float32 error bounds hold for v (its
	// squared norm is within [minSqNorm, maxSqNorm]).
	fast bool
}

// normOf returns v's vecNorm, its tails appended to buf. Squared norms are
// float32 sums of positive terms (vec.Dot) over dupChunk dimensions, each
// within a factor 1±dupChunk·2⁻²⁴ of the exact one, added up in float64.
func normOf(v []float32, buf []float64) (vecNorm, []float64) {
	start := len(buf)
	for lo := 0; lo < len(v); lo += dupChunk {
		c := v[lo:min(lo+dupChunk, len(v))]
		buf = append(buf, float64(vec.Dot(c, c)))
	}
	t := buf[start:]
	for k := len(t) - 2; k >= 0; k-- {
		t[k] += t[k+1]
	}
	if len(t) == 0 || !(t[0] >= minSqNorm && t[0] <= maxSqNorm) { // also NaN
		return vecNorm{}, buf[:start]
	}
	for k := range t {
		t[k] = math.Sqrt(t[k])
	}
	return vecNorm{tails: t, inv: 1 / t[0], fast: true}, buf
}

// nearDup reports whether Cosine(a, b) > dupCosine, for vectors of equal
// length with norms na and nb (normOf). It estimates the cosine from float32
// dot products over dupChunk dimensions at a time (vec.Dot, several times
// faster than Cosine's float64 sums). After each chunk, the dot product so
// far plus the product of the rest's norms bounds the cosine from above
// (Cauchy–Schwarz): when that is below dupCosine by more than the error
// margin, the pair is not similar and the rest is not multiplied. At the
// end, Cosine is asked only when the estimate is within the margin of
// dupCosine, or the error bounds do not hold (norms out of range,
// non-finite values): nearDup answers as Cosine would, always.
//
// The error bound, for n = len(a) and u = 2⁻²⁴: the dot products err by at
// most dupChunk·u·Σ|aᵢbᵢ| ≤ n·u·|a||b| (Cauchy–Schwarz), so the estimated
// cosine by n·u; the norms' float32 sums by a factor 1±n·u, so 1/(|a||b|)
// and a product of tails over it by about n·u each; the products'
// underflow by at most n·2⁻¹⁵⁰/(|a||b|) ≤ n·2⁻¹⁵⁰·10³⁰; the float64
// arithmetic by a few 2⁻⁵³. The margin n·2⁻²¹ = 8·n·u is more than twice
// their sum, and also covers Cosine's own float64 error.
func nearDup(a, b []float32, na, nb *vecNorm) bool {
	if !na.fast || !nb.fast {
		return Cosine(a, b) > dupCosine
	}
	var d float64
	d += float64(vec.Dot(a[:min(dupChunk, len(a))], b))
	return nearDupAfter(a, b, na, nb, d)
}

// nearDupAfter is nearDup for vectors whose norms are both fast, given d,
// float64(vec.Dot) of their first dupChunk dimensions added to 0.
func nearDupAfter(a, b []float32, na, nb *vecNorm, d float64) bool {
	margin := float64(len(a)) * 0x1p-21
	scale := na.inv * nb.inv
	for k, lo := 1, dupChunk; ; k, lo = k+1, lo+dupChunk {
		if k < len(na.tails) && (d+na.tails[k]*nb.tails[k])*scale < dupCosine-margin {
			return false
		}
		if lo >= len(a) {
			break
		}
		hi := min(lo+dupChunk, len(a))
		d += float64(vec.Dot(a[lo:hi], b[lo:hi]))
	}
	c := d * scale
	if math.Abs(c-dupCosine) <= margin || math.IsNaN(c) {
		return Cosine(a, b) > dupCosine
	}
	return c > dupCosine
}

// normText is a passage's text for duplicate detection: lower case, words
// of letters and digits, single spaces: strings.Join(tokenize(s), " ").
func normText(s string) string {
	return string(appendNormText(make([]byte, 0, len(s)), s))
}

// appendNormText appends normText(s) to dst, in one pass, copying runs of
// lower-case ASCII words whole.
func appendNormText(dst []byte, s string) []byte {
	start := len(dst)
	inWord := false
	// word starts or continues a word: a space first if it starts one.
	word := func() {
		if !inWord && len(dst) > start {
			dst = append(dst, ' ')
		}
		inWord = true
	}
	for i := 0; i < len(s); {
		// A run of lower-case ASCII words one space apart is its own
		// normal form.
		j := i
		for j < len(s) {
			if c := s[j]; c-'a' < 26 || c-'0' < 10 || c == ' ' && j > i && j+1 < len(s) && (s[j+1]-'a' < 26 || s[j+1]-'0' < 10) {
				j++
				continue
			}
			break
		}
		if j > i {
			word()
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if c-'A' < 26 {
				word()
				dst = append(dst, c+'a'-'A')
			} else {
				inWord = false
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r = unicode.ToLower(r); unicode.IsLetter(r) || unicode.IsDigit(r) {
			word()
			dst = utf8.AppendRune(dst, r)
		} else {
			inWord = false
		}
	}
	return dst
}
