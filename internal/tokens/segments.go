package tokens

import (
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounds of a segmentCache: texts shorter than segmentMinText, or of one
// line, are counted whole; each of the segmentShards shards keeps at most
// two generations of segmentGeneration counts (≈ 130,000 in all, a few MB).
const (
	segmentMinText    = 512
	segmentShards     = 16
	segmentGeneration = 4096
)

// segmentCache remembers the token counts of the lines of long multi-line
// texts. The prompt's memory block is such a text: rebuilt on every
// request (and again when it is shrunk to fit), it is mostly the same
// lines — the summary, facts, recalled passages — request after request,
// and counting it whole was a tenth of a memory-on request's CPU.
//
// A text is cut only where the pre-tokenizer itself starts a piece after a
// newline and before a character that is not white space, so its count is
// exactly the sum of its segments' counts: a piece is decided by the text
// from its start up to at most the character after it, and each segment
// starts and ends at a piece boundary of the text being counted. Counts are
// kept by a 128-bit keyed hash of the encoding and the segment (no text is
// kept); a full generation of a shard becomes its previous one.
type segmentCache struct {
	seeds  [2]maphash.Seed
	shards [segmentShards]segmentShard
}

type segmentShard struct {
	mu       sync.Mutex
	cur, old map[[2]uint64]int
}

func newSegmentCache() *segmentCache {
	return &segmentCache{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// count returns the number of tokens s encodes to under e: e.count(s),
// summed over s's lines with the lines' counts remembered.
func (c *segmentCache) count(e *encoding, s string) int {
	if len(s) < segmentMinText || !utf8.ValidString(s) || !strings.Contains(s[:len(s)-1], "\n") {
		return e.count(s)
	}
	n, start, cut := 0, 0, false
	for i := 0; i < len(s); {
		j := e.next(s, i)
		if j == len(s) || (s[j-1] == '\n' && !isSpaceByte(s[j])) {
			if j == len(s) && !cut {
				return e.count(s) // one line: nothing to share with other texts
			}
			cut = true
			n += c.segment(e, s, start, j)
			start = j
		}
		i = j
	}
	return n
}

// isSpaceByte reports whether b starts a white-space character or is not
// ASCII (then treated as possibly white space: no cut before it).
func isSpaceByte(b byte) bool {
	return b >= utf8.RuneSelf || b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// segment returns the count of s[from:to], whose ends are piece
// boundaries of s.
func (c *segmentCache) segment(e *encoding, s string, from, to int) int {
	var k [2]uint64
	for i, seed := range c.seeds {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(e.name)
		h.WriteByte(0)
		h.WriteString(s[from:to])
		k[i] = h.Sum64()
	}
	sh := &c.shards[k[0]%segmentShards]
	sh.mu.Lock()
	n, ok := sh.cur[k]
	if !ok {
		if n, ok = sh.old[k]; ok {
			sh.putLocked(k, n)
		}
	}
	sh.mu.Unlock()
	if ok {
		return n
	}
	n = e.countRange(s, from, to)
	sh.mu.Lock()
	sh.putLocked(k, n)
	sh.mu.Unlock()
	return n
}

// putLocked adds k to the current generation, rotating a full one out
// first; sh.mu is held.
func (sh *segmentShard) putLocked(k [2]uint64, n int) {
	if len(sh.cur) >= segmentGeneration {
		sh.old, sh.cur = sh.cur, nil
	}
	if sh.cur == nil {
		sh.cur = make(map[[2]uint64]int, segmentGeneration/4)
	}
	sh.cur[k] = n
}
