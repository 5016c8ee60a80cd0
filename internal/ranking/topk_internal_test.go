package ranking

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// refTopK is TopK as first written, on container/heap.
type refTopK []Scored

func (h refTopK) Len() int           { return len(h) }
func (h refTopK) Less(i, j int) bool { return h[i].Worse(h[j]) }
func (h refTopK) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refTopK) Push(x any)        { *h = append(*h, x.(Scored)) }
func (h *refTopK) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *refTopK) offer(c Scored, k int) {
	if len(*h) < k {
		heap.Push(h, c)
		return
	}
	if (*h)[0].Worse(c) {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}

func (h *refTopK) sorted() []Scored {
	out := make([]Scored, len(*h))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(Scored)
	}
	return out
}

// sameScored reports whether a and b hold the same ids and score bits.
func sameScored(a, b []Scored) bool {
	return slices.EqualFunc(a, b, func(x, y Scored) bool {
		return x.ID == y.ID && math.Float64bits(x.Score) == math.Float64bits(y.Score)
	})
}

// TestTopKMatchesContainerHeap offers random candidates (tied scores,
// repeated ids, NaN scores) to TopK and to the container/heap version it
// replaced: after every offer the heaps hold the same candidates in the
// same places, and Sorted gives the same slice.
func TestTopKMatchesContainerHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for trial := range 2000 {
		k := 1 + r.IntN(20) // k >= 1, as for the original
		var got TopK
		var want refTopK
		for range r.IntN(200) {
			c := Scored{ID: int64(r.IntN(50)), Score: float64(r.IntN(8)) / 8}
			if trial%4 == 0 && r.IntN(15) == 0 {
				c.Score = math.NaN()
			}
			got.Offer(c, k)
			want.offer(c, k)
			if !sameScored(got, want) {
				t.Fatalf("trial %d: heap %v, container/heap %v", trial, got, want)
			}
		}
		if g, w := got.Sorted(), want.sorted(); !sameScored(g, w) {
			t.Fatalf("trial %d: Sorted %v, container/heap %v", trial, g, w)
		}
	}
}

// textSearchReference is TextIndex.Search as it was before candidates were
// dropped ahead of Offer, on the container/heap top.
func textSearchReference(t *TextIndex, ids []int64, terms []string, related []memory.RelatedTerm, limit int, keep func(doc int32) bool) []Scored {
	n := float64(len(t.lens))
	if n == 0 || limit <= 0 {
		return nil
	}
	common := func(ps []posting) bool {
		return 2*len(ps) >= len(t.lens) && len(ps) > memory.CommonTermMinDF
	}
	idf := func(ps []posting) float64 {
		df := float64(len(ps))
		return max(math.Log((n-df+0.5)/(df+0.5)), 1e-6)
	}
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
		if len(ps) > 0 && !(memory.RelatedCommonDivisor*len(ps) >= len(t.lens) && len(ps) > memory.CommonTermMinDF) {
			all = append(all, bm25Term{postings: ps, idf: idf(ps) * weights[f]})
		}
	}
	if len(all) == 0 {
		return nil
	}
	if cap(t.scores) < len(t.lens) {
		t.scores = make([]float64, len(t.lens))
	}
	scores := t.scores[:len(t.lens)]
	touched := t.touched[:0]
	avg := float64(t.total) / n
	for _, bt := range all {
		for _, p := range bt.postings {
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			tf := float64(p.tf)
			scores[p.doc] += bt.idf * tf * (memory.BM25K1 + 1) /
				(tf + memory.BM25K1*(1-memory.BM25B+memory.BM25B*float64(t.lens[p.doc])/avg))
		}
	}
	top := make(refTopK, 0, limit+1)
	for _, d := range touched {
		if keep(d) {
			top.offer(Scored{ID: ids[d], Score: scores[d]}, limit)
		}
		scores[d] = 0
	}
	t.touched = touched[:0]
	return top.sorted()
}

// TestTextSearchMatchesReference compares TextIndex.Search with the
// reference on random indexes: repeated words (tied scores), related
// terms, filters, limits below and above the matches.
func TestTextSearchMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	words := strings.Fields("lisbon porto vegan dinner sister trip budget rent car garden rain dog park coffee")
	for trial := range 300 {
		ti := &TextIndex{}
		var ids []int64
		var convs []string
		for i := range r.IntN(400) {
			w := make([]string, 1+r.IntN(12))
			for j := range w {
				w[j] = words[r.IntN(len(words))]
			}
			ids = append(ids, int64(i+1))
			convs = append(convs, fmt.Sprintf("c%d", r.IntN(3)))
			ti.Add([]byte(strings.Join(w, " ")))
		}
		terms := []string{words[r.IntN(len(words))], words[r.IntN(len(words))]}
		var related []memory.RelatedTerm
		for range r.IntN(4) {
			related = append(related, memory.RelatedTerm{Term: words[r.IntN(len(words))], Weight: r.Float64()})
		}
		limit := 1 + r.IntN(150)
		conv := fmt.Sprintf("c%d", r.IntN(4))
		keep := func(d int32) bool { return trial%2 == 0 || convs[d] == conv }
		got := ti.Search(ids, terms, related, limit, keep)
		want := textSearchReference(ti, ids, terms, related, limit, keep)
		if !sameScored(got, want) {
			t.Fatalf("trial %d: search %v, reference %v", trial, got, want)
		}
	}
}
