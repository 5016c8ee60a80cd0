package memory

// Revisions are a user's revision counters, the one source of every cached
// read's freshness (zero for a user never written). A store's triggers
// move them on every write, by any connection of any process:
//
//   - Added counts inserts of items, Changed deletes and changes of what a
//     search ranks by (and an insert that cannot be read as the rows above
//     the highest id held), Dated the updates that change an item's time
//     said alone (a fact stated again). A user's vectors and text index,
//     extended in place after inserts, carry Added and Changed; the items
//     searches return are kept under Changed, their times said under
//     Dated.
//   - Messages counts updates and deletes of the user's messages (the turns
//     around recalled messages are kept under it: an insert never joins a
//     closed window), MessagesAdded inserts; Tail is their sum.
//   - Facts counts every write of the user's facts, Summaries of their
//     summaries.
//
// None ever decreases (an erasure moves them, and carries them into the
// user's tombstone, keyed by a digest of the ids, whose counts a store
// adds to the user's own), so a value read before a change can never pass
// for a later state. A request
// reads them once, before anything they key, and hands them to every read
// it makes (see internal/engine/cache).
type Revisions struct {
	Added, Changed, Dated int64
	Messages              int64
	MessagesAdded         int64
	Facts, Summaries      int64
}

// Tail is the count every change of the user's messages moves: a
// conversation's newest turns are kept under it.
func (r Revisions) Tail() int64 { return r.MessagesAdded + r.Messages }
