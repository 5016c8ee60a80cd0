package contract

import (
	"hash/fnv"
	"slices"

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
