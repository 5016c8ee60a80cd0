package tokens

import (
	"fmt"
	"math"
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
	if !utf8.ValidString(s) {
		// tiktoken-go encodes a rune slice, so each invalid byte is U+FFFD.
		s = string([]rune(s))
	}
	return e.countRange(s, 0, len(s))
}

// countRange returns the number of tokens of the pieces of s from from to
// to, which must be piece boundaries of valid UTF-8 s.
func (e *encoding) countRange(s string, from, to int) int {
	n := 0
	for i := from; i < to; {
		j := e.next(s, i)
		if _, ok := e.ranks.get(s[i:j]); ok {
			n++
		} else {
			n += e.mergeCount(s[i:j])
		}
		i = j
	}
	return n
}

// maxStackPiece is the longest piece merged without allocating.
const maxStackPiece = 64

// mergeCount runs tiktoken's byte-pair merge over piece (which is not itself
// a token) and returns the number of tokens left: repeatedly merge the
// adjacent pair whose concatenation has the lowest rank.
func (e *encoding) mergeCount(piece string) int {
	if len(piece) == 1 {
		return 1
	}
	// starts[k] is where part k begins; rank[k] is the rank of part k joined
	// with part k+1 (math.MaxInt when that is not a token).
	var startBuf, rankBuf [maxStackPiece + 1]int
	starts, rank := startBuf[:0], rankBuf[:0]
	if len(piece) > maxStackPiece {
		starts, rank = make([]int, 0, len(piece)+1), make([]int, 0, len(piece)+1)
	}
	for k := 0; k <= len(piece); k++ {
		starts = append(starts, k)
		rank = append(rank, math.MaxInt)
	}
	// pairRank is the rank of parts k..k+skip+1 merged.
	pairRank := func(k, skip int) int {
		if k+skip+2 < len(starts) {
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
	return len(starts) - 1
}
