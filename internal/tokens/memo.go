package tokens

import (
	"hash/maphash"
	"sync"
)

// Bounds of a memo: each of the memoShards shards keeps at most two
// generations of memoGeneration counts, so a memo holds at most
// 2*memoShards*memoGeneration of them (≈ 130,000, a few MB).
const (
	memoShards     = 16
	memoGeneration = 4096
)

// Kinds of counted text, part of a memo key.
const (
	kindText    = 't' // a whole text (Counter.Text)
	kindMessage = 'r' // a whole chat message (Counter.RawMessage)
	kindSegment = 's' // a line of a long text (segmentCache)
)

// memo remembers token counts across calls. A count is a pure function of
// the encoding and the text, so a remembered one is never stale. Counts
// are kept by a 64-bit keyed hash of the text (a maphash seed, random
// per process), its kind and encoding, and its length (two texts of one
// kind, encoding and length colliding answer a wrong count, never a
// text: about one chance in 10^10 over the memo's 130,000 counts); no
// text is kept, so nothing of a message — an erased user's included — can
// be read back from it: it only answers what a text the caller already
// holds costs. Each shard keeps
// the counts of the current and the previous generation; a full current
// generation becomes the previous one, so recently used counts stay and
// memory is bounded. It is safe for concurrent use.
type memo struct {
	seed   maphash.Seed
	shards [memoShards]memoShard
}

// memoKey is a text's 64-bit hash and its length, kind and encoding.
type memoKey [2]uint64

type memoShard struct {
	mu       sync.Mutex
	cur, old map[memoKey]int
	hits     int // lookups answered, for tests
}

func newMemo() *memo {
	return &memo{seed: maphash.MakeSeed()}
}

// key returns the key of a text (s, then b) of kind under the encoding
// named enc: the text's hash, and its length with the kind and the
// encoding in the top bytes, so texts of different kinds or encodings
// never share a key. The hash is one maphash.String (or Bytes) call,
// a third of the cost of streaming a short text through a maphash.Hash;
// an encoding other than the two (tests) or a text in two parts (unused)
// is streamed, the encoding's name included.
func (m *memo) key(kind byte, enc, s string, b []byte) memoKey {
	var h uint64
	id := encodingID(enc)
	switch {
	case id != 0 && len(b) == 0:
		h = maphash.String(m.seed, s)
	case id != 0 && s == "":
		h = maphash.Bytes(m.seed, b)
	default:
		var hs maphash.Hash
		hs.SetSeed(m.seed)
		hs.WriteString(enc)
		hs.WriteByte(0)
		hs.WriteString(s)
		hs.Write(b)
		h = hs.Sum64()
	}
	return memoKey{h, uint64(len(s)+len(b)) | uint64(kind)<<56 | id<<48}
}

// encodingID is a small number for each encoding's name, 0 for another.
func encodingID(enc string) uint64 {
	switch enc {
	case O200kBase:
		return 1
	case CL100kBase:
		return 2
	}
	return 0
}

// count returns k's remembered count, or remembers and returns what
// compute answers.
func (m *memo) count(k memoKey, compute func() int) int {
	sh := &m.shards[k[0]%memoShards]
	sh.mu.Lock()
	n, ok := sh.cur[k]
	if !ok {
		if n, ok = sh.old[k]; ok {
			sh.putLocked(k, n) // still in use: keep it past the next rotation
		}
	}
	if ok {
		sh.hits++
	}
	sh.mu.Unlock()
	if ok {
		return n
	}
	n = compute()
	sh.mu.Lock()
	sh.putLocked(k, n)
	sh.mu.Unlock()
	return n
}

// putLocked adds k to the current generation, rotating a full one out
// first; sh.mu is held.
func (sh *memoShard) putLocked(k memoKey, n int) {
	if len(sh.cur) >= memoGeneration {
		sh.old, sh.cur = sh.cur, nil
	}
	if sh.cur == nil {
		sh.cur = make(map[memoKey]int, memoGeneration/4)
	}
	sh.cur[k] = n
}

// stats returns how many counts m holds and how many lookups it answered,
// for tests.
func (m *memo) stats() (held, hits int) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		held += len(sh.cur) + len(sh.old)
		hits += sh.hits
		sh.mu.Unlock()
	}
	return held, hits
}
