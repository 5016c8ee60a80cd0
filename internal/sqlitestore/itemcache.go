package sqlitestore

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// itemCacheBytes bounds the whole items a Store keeps in memory for the
// searches' results, over all users (least recently searched evicted
// first): about 20,000 items of 384 dimensions.
const itemCacheBytes = 32 << 20

// itemCache keeps the items searches return, so that a search whose ranking
// was read from memory (vectors, full-text index) does not read its best
// items' rows again from the file: a warm conversation's recall finds
// mostly the same items request after request, and every commit of the
// capture path empties the readers' page caches, so each row read cost a
// system call per page. It is safe for concurrent use.
//
// A user's items are kept as of the changed count of memory_item_revisions
// (every delete and every update of an item's text, vector, conversation,
// source or time counts there): a search that validated its ranking at
// another count gets nothing from the cache, and one at a newer count
// drops the user's items. Inserts do not count, since they never change an
// item held. So once an erasure or edit has committed, no later search is
// answered with what it deleted or changed.
type itemCache struct {
	*countedCache[int64, memory.Item]
}

func newItemCache(max int) *itemCache {
	return &itemCache{newCountedCache(max, func(_ int64, it memory.Item) int { return itemSize(it) })}
}

// itemSize is roughly what one cached item holds in memory, in bytes.
func itemSize(it memory.Item) int {
	return 160 + len(it.Conversation) + len(it.Kind) + len(it.Ref) + len(it.Text) + len(it.Model) + 4*len(it.Embedding)
}

// put keeps items of the user, read at or after changed (see
// countedCache.put), without their scores.
func (c *itemCache) put(tenant, user string, changed int64, items []memory.Item) {
	c.countedCache.put(tenant, user, changed, func(yield func(int64, memory.Item) bool) {
		for _, it := range items {
			it.Score = 0
			if !yield(it.ID, it) {
				return
			}
		}
	})
}

// cachedItemsByID is itemsByID for ids ranked from the user's vectors or
// full-text index as of changed (memory_item_revisions): the items the
// cache holds at that count come from memory, the others from the file
// (and are then kept). The items' embeddings are the cache's own, capped
// at their length (memory.Item.Embedding: read-only): copying them was a
// third of the bytes a memory-on request allocated.
func (s *Store) cachedItemsByID(ctx context.Context, tenant, user string, changed int64, ranked []scored) ([]memory.Item, error) {
	if len(ranked) == 0 {
		return []memory.Item{}, nil
	}
	ids := make([]int64, len(ranked))
	for i, r := range ranked {
		ids[i] = r.id
	}
	got, missing := s.items.get(tenant, user, changed, ids)
	if len(missing) > 0 {
		sub := make([]scored, len(missing))
		for i, id := range missing {
			sub[i] = scored{id: id}
		}
		read, err := s.itemsByID(ctx, sub)
		if err != nil {
			return nil, err
		}
		mine := read[:0:0]
		for _, it := range read {
			// The ranking is the user's; a row of another user (an id
			// reused after a delete) is never theirs to see.
			if it.Tenant == tenant && it.User == user {
				mine = append(mine, it)
			}
		}
		s.items.put(tenant, user, changed, mine)
		if got == nil {
			got = make(map[int64]memory.Item, len(mine))
		}
		for _, it := range mine {
			got[it.ID] = it
		}
	}
	items := make([]memory.Item, 0, len(ranked))
	for _, r := range ranked {
		if it, ok := got[r.id]; ok {
			it.Score = r.score
			it.Embedding = it.Embedding[:len(it.Embedding):len(it.Embedding)]
			items = append(items, it)
		}
	}
	return items, nil
}
