package tokens

import (
	"hash/maphash"

	"github.com/memgate/memgate/internal/engine/cache"
)

// memoBytes bounds a memo (about 100,000 counts); memoCountBytes is what
// one count accounts for besides the cache's overhead: key and value.
const memoBytes, memoCountBytes = 16 << 20, 32

// Kinds of counted text, part of a memo key.
const (
	kindText    = 't' // a whole text (Counter.Text)
	kindMessage = 'r' // a whole chat message (Counter.RawMessage)
	kindSegment = 's' // a line of a long text (segmentCache)
)

// memo remembers token counts (cache "tokens") by a 64-bit keyed hash of the
// text (maphash, seeded per process), its length, kind, encoding and owner's
// scope: a collision answers a wrong count (about one chance in 10^10),
// never a text. No text is kept, so none (an erased user's included) can be
// read back. It is safe for concurrent use.
type memo struct {
	seed   maphash.Seed
	counts *cache.Cache[memoKey, int]
}

type memoKey struct {
	hash, scope uint64
	len         int
	kind        byte
	enc         *encoding
}

// Owner is no one's: a count holds no user's text, and no erasure drops
// it (the scope is a hash).
func (memoKey) Owner() cache.Owner { return cache.Owner{} }

func newMemo() *memo {
	return &memo{seed: maphash.MakeSeed(),
		counts: cache.New("tokens", memoBytes, func(memoKey, int) int { return memoCountBytes })}
}

// count returns the count of the text (s, or b when not nil) of kind under
// enc in scope: the remembered one, or compute's, remembered.
func (m *memo) count(scope uint64, kind byte, enc *encoding, s string, b []byte, compute func() int) int {
	k := memoKey{0, scope, len(s), kind, enc}
	if b != nil {
		k.hash, k.len = maphash.Bytes(m.seed, b), len(b)
	} else {
		k.hash = maphash.String(m.seed, s)
	}
	if n, ok := m.counts.Get(k); ok {
		return n
	}
	n := compute()
	m.counts.Put(k, n)
	return n
}
