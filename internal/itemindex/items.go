package itemindex

import (
	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// itemKey names one item of a user as of the user's Revisions.Items
// (every delete and every update of an item's text, vector, conversation,
// source or time moves it; inserts do not, since they never change an item
// held). A search is answered only with items read at the count its
// request read: once an erasure or edit has committed, no later search is
// answered with what it deleted or changed.
type itemKey struct {
	Tenant, User string
	Items, ID    int64
}

// newItemCache returns the cache of the items searches return, so that a
// search ranked from memory (vectors, full-text index) does not read its
// best items' rows again: a warm conversation's recall finds mostly the
// same items request after request.
func newItemCache(max int) *cache.Cache[itemKey, memory.Item] {
	return cache.New("items", max, func(_ itemKey, it memory.Item) int { return itemSize(it) })
}

// itemSize is roughly what one cached item holds in memory, in bytes.
func itemSize(it memory.Item) int {
	return 32 + len(it.Conversation) + len(it.Kind) + len(it.Ref) + len(it.Text) + len(it.Model) + 4*len(it.Embedding)
}
