package memory

import (
	"errors"
	"time"
)

// ErrErased reports a write a store refused because the user it is about was
// erased at or after the time the written data was captured (its
// GuardSince: see Fact.GuardSince). Nothing was stored; the caller drops the
// work.
var ErrErased = errors.New("user erased")

// UnstoredTombstoneLife is how long the tombstone of a conversation
// deleted while its store did not hold it (its turns still queued or in
// flight, or an id nobody used) lives, counted both on the clock and on
// the capture queue: it goes only once it was deleted a life before now
// and a life before the oldest entry still queued (TombstoneHorizon).
//
// The rule is that a conversation deleted stays deleted. The tombstone
// drops every turn received before the deletion that is saved after it.
// Such a turn is saved by its request within its in-place retries
// (capture.retry_for, at most a day), or enters the capture queue by
// then, after the deletion purged the queue, and waits there as long as
// the backlog (a store down for a week and more). So a tombstone refuses
// nothing any more once every turn in flight was received after it (the
// clock: a life is longer than a request and its retries), and every
// queued entry was queued more than a life after it (a turn received
// before the deletion was queued within a day of it).
const UnstoredTombstoneLife = 7 * 24 * time.Hour

// TombstoneHorizon returns before which the tombstones of conversations
// never stored may go (UnstoredTombstoneLife): a life before now, or
// before oldestQueued, the enqueue time of the capture queue's oldest
// entry, when that is earlier (zero: the queue is empty).
func TombstoneHorizon(now, oldestQueued time.Time) time.Time {
	if !oldestQueued.IsZero() && oldestQueued.Before(now) {
		now = oldestQueued
	}
	return now.Add(-UnstoredTombstoneLife)
}

// QueuePurge is what an erasure or a conversation deletion did to the
// user's exchanges still waiting in the capture and enrichment queues
// (answered or stored, not yet stored or enriched).
type QueuePurge struct {
	// Queued is how many turns the purge removed from the capture queue:
	// answered, not yet stored (none while Pending).
	Queued int
	// Pending says the queues did not take the purge while the call
	// waited (Redis unreachable): it is retried in the background until
	// they do. Meanwhile the store refuses what those entries would
	// write, since they are dated at or before the erasure or deletion.
	Pending bool
}
