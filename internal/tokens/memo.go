package tokens

import (
	"hash/maphash"

	"github.com/memgate/memgate/internal/engine/cache"
)

// memoBytes bounds a memo (about 100,000 counts).
const memoBytes = 16 << 20

// memoCountBytes is what one count accounts for besides the cache's
// overhead per entry: its key and its value.
const memoCountBytes = 24

// Kinds of counted text, part of a memo key.
const (
	kindText    = 't' // a whole text (Counter.Text)
	kindMessage = 'r' // a whole chat message (Counter.RawMessage)
	kindSegment = 's' // a line of a long text (segmentCache)
)

// memo remembers token counts across calls, in the one cache mechanism
// (cache.Cache: bounded in bytes, least recently used evicted first,
// counted in the cache metrics as "tokens"). A count is a pure function
// of the encoding and the text, so a remembered one is never stale. Counts
// are kept by a 64-bit keyed hash of the text (a maphash seed, random per
// process), its kind and encoding, and its length (two texts of one kind,
// encoding and length colliding answer a wrong count, never a text: about
// one chance in 10^10 over the memo's counts); no text is kept, so nothing
// of a message — an erased user's included — can be read back from it: it
// only answers what a text the caller already holds costs. It is safe for
// concurrent use.
type memo struct {
	seed   maphash.Seed
	counts *cache.Cache[memoKey, int]
}

// memoKey is a text's 64-bit hash and its length, kind and encoding.
type memoKey [2]uint64

func newMemo() *memo {
	return &memo{seed: maphash.MakeSeed(),
		counts: cache.New("tokens", memoBytes, func(memoKey, int) int { return memoCountBytes })}
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
	if n, ok := m.counts.Get(k); ok {
		return n
	}
	n := compute()
	m.counts.Put(k, n)
	return n
}
