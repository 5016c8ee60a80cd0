package sqlitestore

import (
	"math"

	"github.com/memgate/memgate/internal/memory"
	"unicode"
	"unicode/utf8"
)

// Okapi BM25 parameters, FTS5's defaults.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// textRanker scores full-text candidates by Okapi BM25 over the query's
// terms and related terms (a related term's idf times its weight), with
// document frequencies and the average length taken over the candidates,
// in a corpus of at least corpus documents.
type textRanker struct {
	corpus  int
	terms   map[string]int // folded term -> index
	weights []float64      // per term: 1, or a related term's weight
	ids     []int64
	lens    []int
	tf      []int32 // len(terms) counts per candidate
	df      []int
	total   int
}

func newTextRanker(terms []string, related []memory.RelatedTerm, corpus int) *textRanker {
	r := &textRanker{corpus: corpus, terms: make(map[string]int, len(terms)+len(related))}
	for _, t := range terms {
		f := foldWord(t)
		if _, ok := r.terms[f]; !ok {
			r.terms[f] = len(r.terms)
			r.weights = append(r.weights, 1)
		}
	}
	own := len(r.terms)
	for _, t := range related {
		if t.Weight <= 0 {
			continue
		}
		f := foldTerm(t.Term)
		k, ok := r.terms[f]
		switch {
		case !ok:
			r.terms[f] = len(r.terms)
			r.weights = append(r.weights, min(t.Weight, 1))
		case k >= own:
			r.weights[k] = max(r.weights[k], min(t.Weight, 1))
		}
	}
	r.df = make([]int, len(r.terms))
	return r
}

// add counts one candidate's words (split and folded as FTS5's unicode61
// tokenizer with remove_diacritics does, for the common Latin letters).
func (r *textRanker) add(id int64, text []byte) {
	n := len(r.terms)
	base := len(r.tf)
	for range n {
		r.tf = append(r.tf, 0)
	}
	counts := r.tf[base:]
	words := 0
	forEachWord(text, func(w []byte) {
		words++
		if k, ok := r.terms[string(w)]; ok { // no allocation: map lookup by []byte conversion
			counts[k]++
		}
	})
	for k, c := range counts {
		if c > 0 {
			r.df[k]++
		}
	}
	r.ids = append(r.ids, id)
	r.lens = append(r.lens, words)
	r.total += words
}

// best returns the limit best candidates, best first (ties: lower id
// first), each scored by BM25 (> 0; a candidate none of whose words were
// recognised still scores a little, below every one that was).
func (r *textRanker) best(limit int) []scored {
	if len(r.ids) == 0 || limit <= 0 {
		return nil
	}
	n := float64(max(len(r.ids), r.corpus))
	avg := max(float64(r.total)/float64(len(r.ids)), 1)
	idf := make([]float64, len(r.df))
	for k, df := range r.df {
		// FTS5's floor keeps a term in every candidate slightly positive.
		idf[k] = r.weights[k] * max(math.Log((n-float64(df)+0.5)/(float64(df)+0.5)), 1e-6)
	}
	top := make(topK, 0, limit+1)
	nt := len(r.terms)
	for i, id := range r.ids {
		score := 1e-9
		norm := bm25K1 * (1 - bm25B + bm25B*float64(r.lens[i])/avg)
		for k, c := range r.tf[i*nt : (i+1)*nt] {
			if c > 0 {
				tf := float64(c)
				score += idf[k] * tf * (bm25K1 + 1) / (tf + norm)
			}
		}
		top.offer(scored{id: id, score: score}, limit)
	}
	return top.sorted()
}

// asciiFold maps an ASCII byte of a word to its lower case, and every
// other ASCII byte to 0.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c)
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = byte(c)
		t[c-'a'+'A'] = byte(c)
	}
	return t
}()

// isWordRune reports whether c belongs to a word: a letter, digit or
// combining mark.
func isWordRune(c rune) bool {
	if c < utf8.RuneSelf {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return unicode.IsLetter(c) || unicode.IsDigit(c) || unicode.Is(unicode.Mn, c)
}

// foldTerm is foldWord without a copy for a word of lower-case ASCII
// letters and digits, as related terms are.
func foldTerm(w string) string {
	for i := 0; i < len(w); i++ {
		if c := w[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return foldWord(w)
		}
	}
	return w
}

// foldWord lower-cases w and strips the diacritics foldRune knows.
func foldWord(w string) string {
	b := make([]byte, 0, len(w))
	for _, c := range w {
		b = utf8.AppendRune(b, foldRune(c))
	}
	return string(b)
}

// foldRune lower-cases c and strips the diacritics of the common Latin
// letters (Portuguese, Spanish, French, German).
func foldRune(c rune) rune {
	c = unicode.ToLower(c)
	if c < 0xe0 || c > 0x17f {
		return c
	}
	switch c {
	case 'à', 'á', 'â', 'ã', 'ä', 'å':
		return 'a'
	case 'ç':
		return 'c'
	case 'è', 'é', 'ê', 'ë':
		return 'e'
	case 'ì', 'í', 'î', 'ï':
		return 'i'
	case 'ñ':
		return 'n'
	case 'ò', 'ó', 'ô', 'õ', 'ö':
		return 'o'
	case 'ù', 'ú', 'û', 'ü':
		return 'u'
	case 'ý', 'ÿ':
		return 'y'
	}
	return c
}
