package itemindex

import "github.com/memgate/memgate/internal/memory"

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

// itemSize is roughly what one cached item holds in memory, in bytes.
func itemSize(_ itemKey, it memory.Item) int {
	return 32 + len(it.Conversation) + len(it.Kind) + len(it.Ref) + len(it.Text) + len(it.Model) + 4*len(it.Embedding)
}
