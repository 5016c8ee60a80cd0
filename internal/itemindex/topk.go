package itemindex

import (
	"container/heap"
	"math"
)

// Scored is one ranked candidate: an item's id and its score.
type Scored struct {
	ID    int64
	Score float64
}

// worse orders candidates: lower score, then (on ties) higher id, is worse.
func (a Scored) worse(b Scored) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.ID > b.ID
}

// TopK keeps the best candidates offered: a min-heap, worst on top. The
// zero value is ready to use.
type TopK []Scored

func (h TopK) Len() int           { return len(h) }
func (h TopK) Less(i, j int) bool { return h[i].worse(h[j]) }
func (h TopK) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *TopK) Push(x any)        { *h = append(*h, x.(Scored)) }
func (h *TopK) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Offer keeps c when it is among the k best offered.
func (h *TopK) Offer(c Scored, k int) {
	if len(*h) < k {
		heap.Push(h, c)
		return
	}
	if (*h)[0].worse(c) {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}

// Sorted empties the heap into a best-first slice (ties: lower id first).
func (h *TopK) Sorted() []Scored {
	out := make([]Scored, len(*h))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(Scored)
	}
	return out
}

// Norm is the Euclidean length of v.
func Norm(v []float32) float64 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	return math.Sqrt(sum)
}
