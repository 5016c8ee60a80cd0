package tokens

import (
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// encoding is one tiktoken byte-pair encoding: its mergeable ranks and its
// pre-tokenizer. It is immutable and safe for concurrent use.
type encoding struct {
	name  string
	ranks *rankTable
	next  func(s string, i int) int
}

// loadEncoding reads the rank file embedded in tiktoken-go-loader.
func loadEncoding(name string, next func(string, int) int) (*encoding, error) {
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(name + ".tiktoken")
	if err != nil {
		return nil, fmt.Errorf("load %s ranks: %w", name, err)
	}
	table, err := newRankTable(ranks)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &encoding{name: name, ranks: table, next: next}, nil
}

// count returns the number of tokens s encodes to, special-token text
// counted as ordinary text.
func (e *encoding) count(s string) int {
	n, _ := e.countWork(s)
	return n
}

// countWork is count, with the rank lookups it made (the work tests bound).
func (e *encoding) countWork(s string) (tokens, lookups int) {
	if !utf8.ValidString(s) {
		// tiktoken-go encodes a rune slice, so each invalid byte is U+FFFD.
		s = string([]rune(s))
	}
	return e.countRange(s, 0, len(s))
}

// countRange returns the number of tokens of the pieces of s from from to
// to, which must be piece boundaries of valid UTF-8 s, and the rank lookups
// it made: at most three per byte, so counting is linear in the text's
// length (times a heap's logarithm for pieces longer than maxScanPiece).
func (e *encoding) countRange(s string, from, to int) (tokens, lookups int) {
	for i := from; i < to; {
		j := e.next(s, i)
		lookups++
		if _, ok := e.ranks.get(s[i:j]); ok {
			tokens++
		} else {
			n, l := e.mergeCount(s[i:j])
			tokens, lookups = tokens+n, lookups+l
		}
		i = j
	}
	return tokens, lookups
}

// maxScanPiece is the longest piece merged by scanning for the best pair
// (quadratic in the piece's length, and the fastest on the short pieces of
// ordinary text); longer ones are merged with a heap (mergeHeap).
const maxScanPiece = 64

// mergeCount runs tiktoken's byte-pair merge over piece (which is not itself
// a token) and returns the number of tokens left and the rank lookups made:
// repeatedly merge the adjacent pair whose concatenation has the lowest
// rank, the leftmost of equals.
func (e *encoding) mergeCount(piece string) (tokens, lookups int) {
	if len(piece) == 1 {
		return 1, 0
	}
	if len(piece) > maxScanPiece {
		return e.mergeHeap(piece)
	}
	// starts[k] is where part k begins; rank[k] is the rank of part k joined
	// with part k+1 (math.MaxInt when that is not a token).
	var startBuf, rankBuf [maxScanPiece + 1]int
	starts, rank := startBuf[:0], rankBuf[:0]
	for k := 0; k <= len(piece); k++ {
		starts = append(starts, k)
		rank = append(rank, math.MaxInt)
	}
	// pairRank is the rank of parts k..k+skip+1 merged.
	pairRank := func(k, skip int) int {
		if k+skip+2 < len(starts) {
			lookups++
			if r, ok := e.ranks.get(piece[starts[k]:starts[k+skip+2]]); ok {
				return r
			}
		}
		return math.MaxInt
	}
	for k := 0; k < len(starts)-2; k++ {
		rank[k] = pairRank(k, 0)
	}
	for len(starts) > 1 {
		best, at := math.MaxInt, -1
		for k := 0; k < len(starts)-1; k++ {
			if rank[k] < best {
				best, at = rank[k], k
			}
		}
		if at < 0 {
			break
		}
		rank[at] = pairRank(at, 1)
		if at > 0 {
			rank[at-1] = pairRank(at-1, 1)
		}
		starts = append(starts[:at+1], starts[at+2:]...)
		rank = append(rank[:at+1], rank[at+2:]...)
	}
	return len(starts) - 1, lookups
}

// noRank marks a pair that is not a token (or a part that is gone).
const noRank = math.MaxUint32

// merger is the scratch space of mergeHeap, reused through mergers.
type merger struct {
	next, prev []int32  // neighbouring parts, by the byte where a part starts
	rank       []uint32 // rank of the part starting here joined with the next
	heap       []uint64 // rank<<32 | start, a binary min-heap
}

var mergers = sync.Pool{New: func() any { return new(merger) }}

// maxPooledPiece is the longest piece whose scratch space goes back to the
// pool: a rare huge piece's is left to the garbage collector.
const maxPooledPiece = 64 << 10

// mergeHeap is mergeCount for long pieces, in O(n log n) for n bytes:
// parts form a linked list and the candidate pairs wait in a min-heap
// ordered by rank, then by position, so the pair taken is the one
// tiktoken's scan takes (the lowest rank, the leftmost of equals). A heap
// entry whose part has since changed its pair's rank is stale and skipped.
// Each merge makes two lookups and pushes at most two entries, so a piece
// costs at most 3n lookups and 3n heap entries.
func (e *encoding) mergeHeap(piece string) (tokens, lookups int) {
	n := len(piece)
	if n > math.MaxInt32-1 {
		// Unreachable for request bodies; bound the count by the bytes.
		return n, 0
	}
	m := mergers.Get().(*merger)
	defer func() {
		if n <= maxPooledPiece {
			mergers.Put(m)
		}
	}()
	m.next, m.prev, m.rank = grow(m.next, n), grow(m.prev, n), grow(m.rank, n)
	m.heap = m.heap[:0]
	next, prev, rank := m.next, m.prev, m.rank
	for k := range n {
		next[k], prev[k] = int32(k+1), int32(k-1)
	}
	// pair is the rank of part k joined with the part after it.
	pair := func(k int32) uint32 {
		nx := next[k]
		if int(nx) >= n {
			return noRank
		}
		lookups++
		if r, ok := e.ranks.get(piece[k:next[nx]]); ok && r < noRank {
			return uint32(r)
		}
		return noRank
	}
	push := func(k int32) {
		if rank[k] != noRank {
			m.push(uint64(rank[k])<<32 | uint64(k))
		}
	}
	for k := range int32(n) {
		rank[k] = pair(k)
		push(k)
	}
	parts := n
	for len(m.heap) > 0 {
		top := m.pop()
		r, k := uint32(top>>32), int32(top&math.MaxUint32)
		if rank[k] != r {
			continue // stale: k was merged away or its pair changed
		}
		// Merge part k with the part after it.
		gone := next[k]
		after := next[gone]
		next[k] = after
		if int(after) < n {
			prev[after] = k
		}
		rank[gone] = noRank
		parts--
		rank[k] = pair(k)
		push(k)
		if p := prev[k]; p >= 0 {
			rank[p] = pair(p)
			push(p)
		}
	}
	return parts, lookups
}

// grow returns s resliced to n elements, reallocated when too short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// push adds v to the heap.
func (m *merger) push(v uint64) {
	h := append(m.heap, v)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	m.heap = h
}

// pop removes and returns the heap's least entry.
func (m *merger) pop() uint64 {
	h := m.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			c = r
		}
		if h[i] <= h[c] {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	m.heap = h
	return top
}
