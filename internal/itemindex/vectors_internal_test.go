package itemindex

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
	"github.com/memgate/memgate/internal/vec"
)

// refTopK is ranking.TopK as first written, on container/heap.
type refTopK []ranking.Scored

func (h refTopK) Len() int           { return len(h) }
func (h refTopK) Less(i, j int) bool { return h[i].Worse(h[j]) }
func (h refTopK) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refTopK) Push(x any)        { *h = append(*h, x.(ranking.Scored)) }
func (h *refTopK) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *refTopK) offer(c ranking.Scored, k int) {
	if len(*h) < k {
		heap.Push(h, c)
		return
	}
	if (*h)[0].Worse(c) {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}

func (h *refTopK) sorted() []ranking.Scored {
	out := make([]ranking.Scored, len(*h))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(ranking.Scored)
	}
	return out
}

// sameScored reports whether a and b hold the same ids and score bits.
func sameScored(a, b []ranking.Scored) bool {
	return slices.EqualFunc(a, b, func(x, y ranking.Scored) bool {
		return x.ID == y.ID && math.Float64bits(x.Score) == math.Float64bits(y.Score)
	})
}

// searchSetReference is searchSet as first written: every candidate
// offered to the container/heap top.
func searchSetReference(set *vecSet, q memory.ItemQuery, qnorm float64) []ranking.Scored {
	excluded := refSet(q.ExcludeRefs)
	dims := len(q.Embedding)
	top := make(refTopK, 0, q.Limit+1)
	for i, id := range set.ids {
		if (q.Conversation != "" && set.convs[i] != q.Conversation) || excluded[set.refs[i]] {
			continue
		}
		d := vec.Dot(q.Embedding, set.vecs[i*dims:(i+1)*dims])
		top.offer(ranking.Scored{ID: id, Score: float64(d) / (qnorm * set.norms[i])}, q.Limit)
	}
	return top.sorted()
}

// TestSearchSetMatchesReference compares searchSet with the reference on
// random sets: vectors repeated (tied scores), conversation filters (in
// runs, as a conversation's items are, and scattered), excluded refs,
// limits below and above the set's size.
func TestSearchSetMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for trial := range 300 {
		dims := []int{24, 32, 384}[trial%3] // off and on vec.Dots' blocks
		set := &vecSet{}
		n := r.IntN(700) // runs longer than dotRun too
		var pool [][]float32
		for i := range n {
			var v []float32
			if len(pool) > 0 && r.IntN(4) == 0 {
				v = pool[r.IntN(len(pool))]
			} else {
				v = make([]float32, dims)
				for j := range v {
					v[j] = float32(r.IntN(5) - 2)
				}
				if vecNorm(v) == 0 {
					v[0] = 1
				}
				pool = append(pool, v)
			}
			set.vecs = append(set.vecs, v...)
			set.norms = append(set.norms, vecNorm(v))
			set.ids = append(set.ids, int64(i+1))
			conv := fmt.Sprintf("c%d", r.IntN(3))
			if trial%2 == 0 {
				conv = fmt.Sprintf("c%d", i/50%3)
			}
			set.convs = append(set.convs, conv)
			set.refs = append(set.refs, fmt.Sprintf("r%d", r.IntN(n/2+1)))
		}
		q := memory.ItemQuery{Embedding: make([]float32, dims), Limit: 1 + r.IntN(150)}
		for j := range q.Embedding {
			q.Embedding[j] = float32(r.IntN(5) - 2)
		}
		q.Embedding[1] = 1
		if r.IntN(2) == 0 {
			q.Conversation = fmt.Sprintf("c%d", r.IntN(4))
		}
		for range r.IntN(3) * r.IntN(10) {
			q.ExcludeRefs = append(q.ExcludeRefs, fmt.Sprintf("r%d", r.IntN(n/2+1)))
		}
		qnorm := ranking.Norm(q.Embedding)
		if got, want := searchSet(set, q, qnorm), searchSetReference(set, q, qnorm); !sameScored(got, want) {
			t.Fatalf("trial %d: searchSet %v, reference %v", trial, got, want)
		}
	}
}

// BenchmarkSearchSet ranks a user's 1,200 and 10,000 vectors of 384
// dimensions for the best 121 (a recall's limit at TopK 81), across
// conversations and within one (a run of a quarter of the set), with
// searchSet and with the reference (a Dot per item, container/heap).
func BenchmarkSearchSet(b *testing.B) {
	r := rand.New(rand.NewPCG(25, 26))
	const dims = 384
	for _, n := range []int{1200, 10_000} {
		set := &vecSet{}
		for i := range n {
			v := make([]float32, dims)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			set.vecs = append(set.vecs, v...)
			set.norms = append(set.norms, vecNorm(v))
			set.ids = append(set.ids, int64(i+1))
			set.convs = append(set.convs, fmt.Sprintf("c%d", i*4/n))
			set.refs = append(set.refs, fmt.Sprintf("e%d:0", i))
		}
		q := memory.ItemQuery{Embedding: make([]float32, dims), Limit: 121}
		for j := range q.Embedding {
			q.Embedding[j] = float32(r.NormFloat64())
		}
		qnorm := ranking.Norm(q.Embedding)
		for _, conv := range []string{"", "c3"} {
			q.Conversation = conv
			for _, bm := range []struct {
				name   string
				search func(*vecSet, memory.ItemQuery, float64) []ranking.Scored
			}{{"searchSet", searchSet}, {"reference", searchSetReference}} {
				b.Run(fmt.Sprintf("%d/conv=%s/%s", n, conv, bm.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						bm.search(set, q, qnorm)
					}
				})
			}
		}
	}
}
