package itemindex

import "github.com/memgate/memgate/internal/memory"

// itemCache keeps the items searches return, so that a search ranked from
// memory (vectors, full-text index) does not read its best items' rows
// again: a warm conversation's recall finds mostly the same items request
// after request. It is safe for concurrent use.
//
// A user's items are kept as of Revisions.Changed (every delete and every
// update of an item's text, vector, conversation, source or time counts
// there): a search that validated its ranking at another count gets
// nothing from the cache, and one at a newer count drops the user's items.
// Inserts do not count, since they never change an item held. So once an
// erasure or edit has committed, no later search is answered with what it
// deleted or changed.
type itemCache struct {
	*CountedCache[int64, memory.Item]
}

func newItemCache(max int) *itemCache {
	return &itemCache{NewCountedCache(max, func(_ int64, it memory.Item) int { return itemSize(it) })}
}

// itemSize is roughly what one cached item holds in memory, in bytes.
func itemSize(it memory.Item) int {
	return 160 + len(it.Conversation) + len(it.Kind) + len(it.Ref) + len(it.Text) + len(it.Model) + 4*len(it.Embedding)
}

// put keeps items of the user, read at or after changed (see
// CountedCache.Put), without their scores.
func (c *itemCache) put(tenant, user string, changed int64, items []memory.Item) {
	c.Put(tenant, user, changed, func(yield func(int64, memory.Item) bool) {
		for _, it := range items {
			it.Score = 0
			if !yield(it.ID, it) {
				return
			}
		}
	})
}
