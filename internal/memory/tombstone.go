package memory

import (
	"crypto/sha256"
	"strconv"
	"time"
)

// Tombstone digests. A user's erasure and a conversation's deletion are
// recorded under a one-way digest of their ids, never the ids in the
// clear (a user id is often an email or another personal identifier):
// the stores' tombstones (internal/store/contract says how they use
// them) and the purges of the queues not done yet (PendingPurge).
//
// The digest is SHA-256 over a domain tag and the ids, each written as a
// netstring (its length in bytes, a colon, its bytes, a comma), so that no
// two lists of ids share an encoding; PostgreSQL computes the same bytes
// in SQL (its migration 0027).

// Domain tags of the tombstone digests, one per kind of tombstone.
const (
	userTombstoneTag         = "memgate/tombstone/user/v1\n"
	conversationTombstoneTag = "memgate/tombstone/conversation/v1\n"
)

// UserTombstone returns the key of the erasure tombstone of (tenant,
// user): SHA-256 of its domain tag and the two ids as netstrings.
func UserTombstone(tenant, user string) []byte {
	return TaggedDigest(userTombstoneTag, tenant, user)
}

// ConversationTombstone returns the key of the deletion tombstone of
// conversation id: SHA-256 of its domain tag and the tenant, user and
// conversation ids as netstrings.
func ConversationTombstone(id Identity) []byte {
	return TaggedDigest(conversationTombstoneTag, id.Tenant, id.User, id.Conversation)
}

// TaggedDigest returns SHA-256 of tag and ids, each id written as a
// netstring: the tombstone digests', and the stores' other one-way keys
// of ids (a provider state's).
func TaggedDigest(tag string, ids ...string) []byte {
	h := sha256.New()
	h.Write([]byte(tag))
	var n []byte
	for _, id := range ids {
		n = strconv.AppendInt(n[:0], int64(len(id)), 10)
		h.Write(n)
		h.Write([]byte{':'})
		h.Write([]byte(id))
		h.Write([]byte{','})
	}
	return h.Sum(nil)
}

// PendingPurge is an erasure's or a conversation deletion's purge of the
// capture and enrichment queues that is not known to be done: the store
// keeps it until a purge of the queues covering it has gone through, so
// that a process that stops (or gives it up) leaves it to the next one.
// It names what it voids by digest only, as the tombstones do.
type PendingPurge struct {
	// Key is the tombstone digest of what was erased: UserTombstone of
	// the user, or, with Conversation, ConversationTombstone of the
	// conversation.
	Key          []byte
	Conversation bool
	// At is when the erasure or deletion was dated (the store's ErasedAt
	// or DeletedAt): the purge voids the entries dated at or before it.
	At time.Time
}
