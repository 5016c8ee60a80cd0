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

// ChatHolds are the holds of chat locks a store handle has (each
// LockChats call's: its lock keys and its holder, a token or the
// connection holding them), by the memory.Fence each was given. A write
// under a hold names its fence (memory.Exchange.Fence), and the handle
// checks, before it commits, that this very hold still holds the chat
// (memory.ErrLockLost): a hold released, or lost and followed by another
// hold of the same chat on the same handle, vouches for nothing. The zero
// value is ready to use; it is safe for concurrent use.
type ChatHolds[K, V comparable] struct {
	mu    sync.Mutex
	last  memory.Fence
	holds map[memory.Fence]chatHold[K, V]
}

// chatHold is one hold of ChatHolds.
type chatHold[K, V comparable] struct {
	keys   []K
	holder V
}

// Add records a hold of keys by holder and returns its fence, never zero,
// never given before on this ChatHolds.
func (h *ChatHolds[K, V]) Add(keys []K, holder V) memory.Fence {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds == nil {
		h.holds = map[memory.Fence]chatHold[K, V]{}
	}
	h.last++
	h.holds[h.last] = chatHold[K, V]{keys: slices.Clone(keys), holder: holder}
	return h.last
}

// Remove forgets the hold fence names: it has ended.
func (h *ChatHolds[K, V]) Remove(fence memory.Fence) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.holds, fence)
}

// Holder returns the holder of the hold fence names, when that hold is
// recorded (not ended) and covers key.
func (h *ChatHolds[K, V]) Holder(fence memory.Fence, key K) (V, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hold, ok := h.holds[fence]
	if !ok || !slices.Contains(hold.keys, key) {
		var zero V
		return zero, false
	}
	return hold.holder, true
}

// Holders returns the holders of the recorded holds that cover key (for
// tests that make a handle's hold lapse).
func (h *ChatHolds[K, V]) Holders(key K) []V {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []V
	for _, hold := range h.holds {
		if slices.Contains(hold.keys, key) {
			out = append(out, hold.holder)
		}
	}
	return out
}
