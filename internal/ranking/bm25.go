// Package ranking scores and orders candidates the way every store ranks
// them: Okapi BM25 (one formula for every full-text ranking in Go, the
// in-memory text index it scores), words split and folded as SQLite FTS5's
// unicode61 tokenizer does, and the best k of a stream of scored
// candidates. It imports the domain alone, so the stores and the in-memory
// item index (internal/itemindex) share it.
package ranking

import (
	"math"

	"github.com/memgate/memgate/internal/memory"
)

// BM25IDF is the inverse document frequency every full-text ranking gives
// a term found in df of n documents: ln((n - df + 0.5) / (df + 0.5)),
// floored at 1e-6 as FTS5 floors it, so a term in half the documents or
// more still counts a little.
func BM25IDF(n, df float64) float64 {
	return max(math.Log((n-df+0.5)/(df+0.5)), 1e-6)
}

// BM25 is one term's Okapi BM25 contribution (memory.BM25K1,
// memory.BM25B) to a document of docLen words, where the average is avgLen,
// that holds it tf times, for a term of inverse document frequency idf (a
// related term's times its weight). The SQL fallback of the PostgreSQL
// store computes the same in its statement.
func BM25(idf, tf, docLen, avgLen float64) float64 {
	return idf * tf * (memory.BM25K1 + 1) / (tf + memory.BM25K1*(1-memory.BM25B+memory.BM25B*docLen/avgLen))
}

// posting is one document holding a term: the document's number in its
// TextIndex and how often the term occurs in it.
type posting struct {
	doc, tf int32
}

// TextIndex is an inverted index of documents numbered from 0 in the order
// added: every document's words, split and folded by ForEachWord, with the
// statistics BM25 needs (document count, lengths, document frequencies).
// The zero value is an empty index. It is not safe for concurrent use: a
// search writes its scratch space.
type TextIndex struct {
	lens     []int32 // words per document
	total    int64   // words of all documents
	postings map[string][]posting
	bytes    int // roughly what the index holds in memory
	// scores and touched are scratch space for one search at a time.
	scores  []float64
	touched []int32
}

// Size is roughly what the index holds in memory, in bytes: its postings
// and document lengths.
func (t *TextIndex) Size() int { return t.bytes }

// Docs is the number of documents added.
func (t *TextIndex) Docs() int { return len(t.lens) }

// DocFreq is the number of documents holding the folded word w (FoldWord).
func (t *TextIndex) DocFreq(w string) int { return len(t.postings[w]) }

// Add indexes text as the next document.
func (t *TextIndex) Add(text []byte) {
	if t.postings == nil {
		t.postings = map[string][]posting{}
	}
	doc := int32(len(t.lens))
	counts := map[string]int32{}
	words := int32(0)
	ForEachWord(text, func(w []byte) {
		words++
		counts[string(w)]++
	})
	for w, tf := range counts {
		ps, ok := t.postings[w]
		if !ok {
			t.bytes += len(w) + 64
		}
		t.postings[w] = append(ps, posting{doc: doc, tf: tf})
		t.bytes += 8
	}
	t.lens = append(t.lens, words)
	t.total += int64(words)
	t.bytes += 4
}

// bm25Term is one query term's postings and idf (a related term's times
// its weight).
type bm25Term struct {
	postings []posting
	idf      float64
}

// Search ranks the index's documents for terms and related terms by Okapi
// BM25 (memory.BM25K1, memory.BM25B) and returns the best limit that keep
// accepts, as Scored with ids[doc] for ID (ids holds one id per document),
// best first, ties lower id first. A term's idf is BM25IDF, a related
// term's times its weight; a term in half the documents or more and in
// more than memory.CommonTermMinDF of them is left out unless every one of
// terms is, and a related term already in 1/memory.RelatedCommonDivisor of
// them (see memory.RelatedTerm). Documents matching no term are never
// returned.
func (t *TextIndex) Search(ids []int64, terms []string, related []memory.RelatedTerm, limit int, keep func(doc int32) bool) []Scored {
	docs := len(t.lens)
	n := float64(docs)
	if n == 0 || limit <= 0 {
		return nil
	}
	common := func(ps []posting) bool {
		return 2*len(ps) >= docs && len(ps) > memory.CommonTermMinDF
	}
	idf := func(ps []posting) float64 { return BM25IDF(n, float64(len(ps))) }
	var all, selective []bm25Term
	seen := make(map[string]bool, len(terms))
	for _, w := range terms {
		f := FoldWord(w)
		if seen[f] {
			continue
		}
		seen[f] = true
		ps := t.postings[f]
		if len(ps) == 0 {
			continue
		}
		bt := bm25Term{postings: ps, idf: idf(ps)}
		all = append(all, bt)
		if !common(ps) {
			selective = append(selective, bt)
		}
	}
	if len(selective) > 0 {
		all = selective
	}
	// Each related term once, with its highest weight, unless it is one
	// of terms.
	var weights map[string]float64
	var order []string
	if len(related) > 0 {
		weights = make(map[string]float64, len(related))
		order = make([]string, 0, len(related))
	}
	for _, r := range related {
		f := FoldTerm(r.Term)
		if seen[f] || r.Weight <= 0 {
			continue
		}
		w, ok := weights[f]
		if !ok {
			order = append(order, f)
		}
		weights[f] = max(w, min(r.Weight, 1))
	}
	for _, f := range order {
		ps := t.postings[f]
		if len(ps) > 0 && !(memory.RelatedCommonDivisor*len(ps) >= docs && len(ps) > memory.CommonTermMinDF) {
			all = append(all, bm25Term{postings: ps, idf: idf(ps) * weights[f]})
		}
	}
	if len(all) == 0 {
		return nil
	}
	if cap(t.scores) < docs {
		t.scores = make([]float64, docs)
	}
	scores := t.scores[:docs]
	touched := t.touched[:0]
	avg := float64(t.total) / n
	for _, bt := range all {
		for _, p := range bt.postings {
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			scores[p.doc] += BM25(bt.idf, float64(p.tf), float64(t.lens[p.doc]), avg)
		}
	}
	top := make(TopK, 0, limit+1)
	for _, d := range touched {
		// A candidate no better than a full top's worst is dropped before
		// it is offered (Offer would drop it too).
		if c := (Scored{ID: ids[d], Score: scores[d]}); (len(top) < limit || top[0].Worse(c)) && keep(d) {
			top.Offer(c, limit)
		}
		scores[d] = 0
	}
	t.touched = touched[:0]
	return top.Sorted()
}
