package itemindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/ranking"
)

// textIndex is one user's full-text index (ranking.TextIndex) with the
// items it holds, document d being item ids[d]. It is read and extended
// under its slot's mutex only.
type textIndex struct {
	held
	ranking.TextIndex
	heldBytes int // what held holds in memory, roughly
}

// size is roughly what t holds in memory, in bytes.
func (t *textIndex) size() int { return t.heldBytes + t.TextIndex.Size() }

// addDoc indexes one item.
func (t *textIndex) addDoc(id int64, conv, ref string, text []byte) {
	t.ids = append(t.ids, id)
	t.convs = append(t.convs, conv)
	t.refs = append(t.refs, ref)
	t.maxID = max(t.maxID, id)
	t.Add(text)
	t.heldBytes += 8 + 16 + len(conv) + 16 + len(ref)
}

// withTextIndex runs fn on the user's index, current as of rev
// (slots.with), holding the slot's mutex (fn's searches write the index's
// scratch space). It returns ErrTooBig for a user too large to index in
// memory.
func (x *Index) withTextIndex(ctx context.Context, rev cache.Revisions, tenant, user string, fn func(t *textIndex)) error {
	// Read and extended under the slot's mutex only: in place.
	return x.texts.with(Key{Tenant: tenant, User: user}, rev, func(cur *textIndex) *textIndex {
		if cur == nil {
			return &textIndex{}
		}
		return cur
	}, func(t *textIndex) error { return x.loadTexts(ctx, tenant, user, t, x.texts.limit()) }, fn)
}

// loadTexts indexes into t the user's items with ids above t.maxID; an
// index past limit bytes fails with ErrTooBig.
func (x *Index) loadTexts(ctx context.Context, tenant, user string, t *textIndex, limit int) error {
	err := x.src.LoadTexts(ctx, tenant, user, t.maxID, func(id int64, conv, ref string, text []byte) error {
		t.addDoc(id, conv, ref, text)
		if t.size() > limit {
			return ErrTooBig
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrTooBig) {
		return fmt.Errorf("load texts: %w", err)
	}
	return err
}
