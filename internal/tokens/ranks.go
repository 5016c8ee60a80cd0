package tokens

import (
	"fmt"
	"hash/maphash"
	"math/bits"
)

// rankTable maps token bytes to their BPE rank. It is an open-addressing hash
// table over one byte arena and holds no pointers besides its two slices, so
// the garbage collector never scans its hundreds of thousands of entries (as
// a map[string]int of the same tokens, 16 MB of pointers marked on every GC
// cycle, it cost tens of milliseconds of mark work per cycle in the gateway).
type rankTable struct {
	seed  maphash.Seed
	arena []byte
	slots []rankSlot
	mask  uint64
	// maxLen is the longest token's length: a longer text is no token,
	// answered without hashing it.
	maxLen int
}

// rankSlot is one table entry; n == 0 marks an empty slot.
type rankSlot struct {
	off  uint32
	rank uint32
	n    uint32
}

// newRankTable builds a table from tiktoken's ranks.
func newRankTable(ranks map[string]int) (*rankTable, error) {
	size := 0
	for tok := range ranks {
		size += len(tok)
	}
	if size > 1<<32-1 || len(ranks) > 1<<30 {
		return nil, fmt.Errorf("rank table too large: %d tokens, %d bytes", len(ranks), size)
	}
	nslots := 1 << bits.Len(uint(len(ranks)*2)) // load factor ≤ 0.5
	t := &rankTable{
		seed:  maphash.MakeSeed(),
		arena: make([]byte, 0, size),
		slots: make([]rankSlot, nslots),
		mask:  uint64(nslots - 1),
	}
	for tok, rank := range ranks {
		if tok == "" || rank < 0 || rank > 1<<32-1 {
			return nil, fmt.Errorf("bad rank entry %q: %d", tok, rank)
		}
		i := maphash.String(t.seed, tok) & t.mask
		for t.slots[i].n != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = rankSlot{off: uint32(len(t.arena)), rank: uint32(rank), n: uint32(len(tok))}
		t.arena = append(t.arena, tok...)
		t.maxLen = max(t.maxLen, len(tok))
	}
	return t, nil
}

// get returns the rank of tok and whether tok is a token.
func (t *rankTable) get(tok string) (int, bool) {
	if len(tok) > t.maxLen {
		return 0, false
	}
	i := maphash.String(t.seed, tok) & t.mask
	for {
		s := &t.slots[i]
		if s.n == 0 {
			return 0, false
		}
		if int(s.n) == len(tok) && string(t.arena[s.off:s.off+s.n]) == tok {
			return int(s.rank), true
		}
		i = (i + 1) & t.mask
	}
}
