package ranking

import "math"

// Scored is one ranked candidate: an item's id and its score.
type Scored struct {
	ID    int64
	Score float64
}

// Worse orders candidates: lower score, then (on ties) higher id, is worse.
func (a Scored) Worse(b Scored) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.ID > b.ID
}

// TopK keeps the best candidates offered: a min-heap, worst on top. The
// zero value is ready to use. It implements container/heap.Interface;
// Offer and Sorted run container/heap's algorithm (the same comparisons
// and swaps, so the same results, NaN scores included) without its
// interface calls, which cost as much as the dot products of a vector
// search.
type TopK []Scored

func (h TopK) Len() int           { return len(h) }
func (h TopK) Less(i, j int) bool { return h[i].Worse(h[j]) }
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
		*h = append(*h, c)
		h.up(len(*h) - 1)
		return
	}
	if (*h)[0].Worse(c) {
		(*h)[0] = c
		h.down(0, len(*h))
	}
}

// Sorted empties the heap into a best-first slice (ties: lower id first).
func (h *TopK) Sorted() []Scored {
	out := make([]Scored, len(*h))
	for i := len(out) - 1; i >= 0; i-- {
		s := *h
		n := len(s) - 1
		s[0], s[n] = s[n], s[0]
		h.down(0, n)
		out[i] = s[n]
		*h = s[:n]
	}
	return out
}

// up is container/heap's up.
func (h TopK) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h[j].Worse(h[i]) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

// down is container/heap's down.
func (h TopK) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h[j2].Worse(h[j1]) {
			j = j2 // right child
		}
		if !h[j].Worse(h[i]) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	return i > i0
}

// Norm is the Euclidean length of v.
func Norm(v []float32) float64 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	return math.Sqrt(sum)
}
