package contract

import "github.com/memgate/memgate/internal/memory"

// Tombstones. A user's erasure and a conversation's deletion leave a row
// that refuses the writes in flight when they happened (an exchange
// received before, saved after). A user id is often an email or another
// personal identifier, so those rows hold no id in the clear: they are
// keyed by a one-way digest of it, which a writer computes from the ids it
// is about to write and compares, and which nothing can turn back into the
// id. (Who holds the database and guesses an id can still confirm the
// guess: the digest has no secret key, which would have to outlive every
// tombstone and every backup of it. docs/architecture.md, "Why the
// tombstone digests are not keyed", says what a key would take.)
//
// The digest is memory.UserTombstone's or memory.ConversationTombstone's
// (SHA-256 over a domain tag and the ids as netstrings); PostgreSQL
// computes the same bytes in SQL (its migration 0027 re-keys the
// tombstones of earlier builds).

// UserTombstone returns the key of the erasure tombstone of (tenant,
// user) (memory.UserTombstone).
func UserTombstone(tenant, user string) []byte { return memory.UserTombstone(tenant, user) }

// ConversationTombstone returns the key of the deletion tombstone of
// conversation id (memory.ConversationTombstone).
func ConversationTombstone(id memory.Identity) []byte { return memory.ConversationTombstone(id) }

// Tombstones of conversations never stored. Deleting a conversation the
// store does not hold (its turns still queued or in flight, or an id
// nobody used) leaves a tombstone all the same, so that a turn received
// before the deletion is dropped when it is saved. Past its life
// (memory.UnstoredTombstoneLife, counted on the clock and on the capture
// queue's oldest entry: memory.TombstoneHorizon) it refuses nothing, and
// the stores delete it (ExpireTombstones, a few after every conversation
// deletion), so a tenant key deleting ids that were never stored does not
// grow the table without bound. A tombstone of a conversation that was
// stored keeps until its user's erasure.

// UnstoredTombstonePrune is how many expired tombstones one
// ExpireTombstones deletes at most: more than a deletion adds.
const UnstoredTombstonePrune = 16
