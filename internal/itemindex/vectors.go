package itemindex

import (
	"math"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
	"github.com/memgate/memgate/internal/vec"
)

// vecSet is one user's vectors of one model and dimension, never written
// once published (its searches read it outside the slot's mutex): a
// refresh appends to a copy, past the published length, or builds anew.
type vecSet struct {
	held
	vecs  []float32
	norms []float64 // Euclidean length per item (never 0)
}

func (s *vecSet) size() int { return s.bytes + 4*len(s.vecs) + 8*len(s.norms) }

// add appends one item's vector, unless it is not of key.Dims dimensions
// or is zero.
func (s *vecSet) add(key Key, id int64, conv, ref string, _ []byte, v []float32) {
	if n := vecNorm(v); len(v) == key.Dims && n != 0 {
		s.vecs = append(s.vecs, v...)
		s.norms = append(s.norms, n)
		s.hold(id, conv, ref)
	}
}

// vecNorm is the length of a stored vector, summed as cosine sums it.
func vecNorm(y []float32) float64 {
	var v0, v1, v2, v3 float32
	i := 0
	for ; i+4 <= len(y); i += 4 {
		ys := y[i : i+4 : i+4]
		v0, v1, v2, v3 = v0+ys[0]*ys[0], v1+ys[1]*ys[1], v2+ys[2]*ys[2], v3+ys[3]*ys[3]
	}
	for ; i < len(y); i++ {
		v0 += y[i] * y[i]
	}
	return math.Sqrt(float64((v0 + v1) + (v2 + v3)))
}

// searchSet returns the best q.Limit of set's vectors by cosine similarity
// to q.Embedding (of length qnorm), within q's conversation and excluded
// refs, best first. Each run of consecutive vectors searched (up to dotRun)
// is one vec.Dots call.
func searchSet(set *vecSet, q memory.ItemQuery, qnorm float64) []ranking.Scored {
	excluded := refSet(q.ExcludeRefs)
	dims := len(q.Embedding)
	top := make(ranking.TopK, 0, q.Limit+1)
	filter := q.Conversation != "" || excluded != nil
	n := len(set.ids)
	vecs, norms, convs, refs := set.vecs[:n*dims], set.norms[:n], set.convs[:n], set.refs[:n]
	searched := func(i int) bool {
		return !filter || ((q.Conversation == "" || convs[i] == q.Conversation) && !excluded[refs[i]])
	}
	var dots [dotRun]float32
	for i := 0; i < n; {
		if !searched(i) {
			i++
			continue
		}
		j := i + 1
		for j < n && j-i < dotRun && searched(j) {
			j++
		}
		run := dots[:j-i]
		vec.Dots(q.Embedding, vecs[i*dims:j*dims], run)
		for k, d := range run {
			c := ranking.Scored{ID: set.ids[i+k], Score: float64(d) / (qnorm * norms[i+k])}
			if len(top) == q.Limit && !top[0].Worse(c) {
				continue
			}
			top.Offer(c, q.Limit)
		}
		i = j
	}
	return top.Sorted()
}

// dotRun is how many vectors searchSet multiplies in one vec.Dots call.
const dotRun = 256
