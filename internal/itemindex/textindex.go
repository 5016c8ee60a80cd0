package itemindex

import (
	"github.com/memgate/memgate/internal/ranking"
)

// textIndex is one user's full-text index (ranking.TextIndex), document d
// being item ids[d], read and extended under its slot's mutex only (its
// searches write the index's scratch space).
type textIndex struct {
	held
	ranking.TextIndex
	heldBytes int // what held holds in memory, roughly
}

// size is roughly what t holds in memory, in bytes.
func (t *textIndex) size() int { return t.heldBytes + t.TextIndex.Size() }

// add indexes one item's text.
func (t *textIndex) add(_ Key, limit int, id int64, conv, ref string, text []byte, _ []float32) error {
	t.hold(id, conv, ref)
	t.Add(text)
	t.heldBytes += 8 + 16 + len(conv) + 16 + len(ref)
	if t.size() > limit {
		return ErrTooBig
	}
	return nil
}
