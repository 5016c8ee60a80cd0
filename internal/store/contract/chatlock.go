package contract

import (
	"hash/fnv"
	"slices"
	"sync"

	"github.com/memgate/memgate/internal/memory"
)

// ChatKeys returns the lock keys of chats (record.ChatLocker), distinct
// and in ascending order, the order every holder takes them in: a 64-bit
// FNV-1a hash of the tenant, the user and the conversation. Two chats
// whose keys collide are only serialized with each other.
func ChatKeys(chats []memory.Identity) []int64 {
	keys := make([]int64, 0, len(chats))
	for _, id := range chats {
		h := fnv.New64a()
		for _, s := range []string{id.Tenant, id.User, id.Conversation} {
			h.Write([]byte(s))
			h.Write([]byte{0}) // ids never hold NUL
		}
		keys = append(keys, int64(h.Sum64()))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// ChatHolds are the chat locks a store handle holds: each lock key's
// holder (its token, its connection), which the handle's writes to the
// chat check before they commit (memory.ErrLockLost). The zero value is
// ready to use; it is safe for concurrent use.
type ChatHolds[K, V comparable] struct {
	mu sync.Mutex
	m  map[K]V
}

// Add records holder as the holder of keys.
func (h *ChatHolds[K, V]) Add(keys []K, holder V) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[K]V{}
	}
	for _, k := range keys {
		h.m[k] = holder
	}
}

// Remove forgets the keys holder holds.
func (h *ChatHolds[K, V]) Remove(keys []K, holder V) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if h.m[k] == holder {
			delete(h.m, k)
		}
	}
}

// Holder returns the holder of key's lock on this handle, if it holds it.
func (h *ChatHolds[K, V]) Holder(key K) (V, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	holder, ok := h.m[key]
	return holder, ok
}
