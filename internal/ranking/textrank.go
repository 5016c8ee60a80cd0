package ranking

import (
	"github.com/memgate/memgate/internal/memory"
)

// TextRanker scores full-text candidates by Okapi BM25 over the query's
// terms and related terms (a related term's idf times its weight), with
// document frequencies and the average length taken over the candidates,
// in a corpus of at least corpus documents. A store that finds a window of
// candidates in SQL (the SQLite store's full-text fallback) ranks them
// with it.
type TextRanker struct {
	corpus  int
	terms   map[string]int // folded term -> index
	weights []float64      // per term: 1, or a related term's weight
	ids     []int64
	lens    []int
	tf      []int32 // len(terms) counts per candidate
	df      []int
	total   int
}

// NewTextRanker returns a TextRanker for the query's terms (words, as
// memory.QueryTerms gives them) and related terms, in a corpus of at least
// corpus documents.
func NewTextRanker(terms []string, related []memory.RelatedTerm, corpus int) *TextRanker {
	r := &TextRanker{corpus: corpus, terms: make(map[string]int, len(terms)+len(related))}
	for _, t := range terms {
		f := FoldWord(t)
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
		f := FoldTerm(t.Term)
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

// Add counts one candidate's words (split and folded as FTS5's unicode61
// tokenizer with remove_diacritics does, for the common Latin letters).
func (r *TextRanker) Add(id int64, text []byte) {
	n := len(r.terms)
	base := len(r.tf)
	for range n {
		r.tf = append(r.tf, 0)
	}
	counts := r.tf[base:]
	words := 0
	ForEachWord(text, func(w []byte) {
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

// Best returns the limit best candidates, best first (ties: lower id
// first), each scored by BM25 (> 0; a candidate none of whose words were
// recognised still scores a little, below every one that was).
func (r *TextRanker) Best(limit int) []Scored {
	if len(r.ids) == 0 || limit <= 0 {
		return nil
	}
	n := float64(max(len(r.ids), r.corpus))
	avg := max(float64(r.total)/float64(len(r.ids)), 1)
	idf := make([]float64, len(r.df))
	for k, df := range r.df {
		idf[k] = r.weights[k] * BM25IDF(n, float64(df))
	}
	top := make(TopK, 0, limit+1)
	nt := len(r.terms)
	for i, id := range r.ids {
		score := 1e-9
		for k, c := range r.tf[i*nt : (i+1)*nt] {
			if c > 0 {
				score += BM25(idf[k], float64(c), float64(r.lens[i]), avg)
			}
		}
		top.Offer(Scored{ID: id, Score: score}, limit)
	}
	return top.Sorted()
}
