package cache

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// Revisions are a user's revision counters, the one source of every cached
// read's freshness (zero for a user never written). The store's triggers
// move them on every write, by any connection of any process:
//
//   - Added counts inserts of items, Changed deletes and changes of what a
//     search reads (and an insert that cannot be read as the rows above the
//     highest id held). The items searches return are kept under Changed;
//     a user's vectors and text index, extended in place after inserts,
//     carry both.
//   - Messages counts updates and deletes of the user's messages (the turns
//     around recalled messages are kept under it: an insert never joins a
//     closed window), MessagesAdded inserts (a store that keeps no
//     conversation's newest turns may leave it 0); Tail is their sum.
//   - Facts counts every write of the user's facts, Summaries of their
//     summaries (a store that keeps neither in memory may leave them 0).
//
// None ever decreases (an erasure moves them and keeps the user's row), so
// an entry read before a change can never pass for a later state.
type Revisions struct {
	Added, Changed, Messages int64
	MessagesAdded            int64
	Facts, Summaries         int64
}

// Tail is the count every change of the user's messages moves: a
// conversation's newest turns are kept under it.
func (r Revisions) Tail() int64 { return r.MessagesAdded + r.Messages }

// RevisionReader reads a user's Revisions, in one lookup.
type RevisionReader interface {
	ItemRevisions(ctx context.Context, tenant, user string) (Revisions, error)
}

// revisionsKey names one user's Revisions of one store in a memory.Memo.
type revisionsKey struct {
	src          RevisionReader
	tenant, user string
}

// ReadRevisions reads the user's Revisions from src, before the values
// they key are read (a value read after a change is then never kept under
// the revision from before it). It reads once for all of a request when ctx
// carries a memory.Memo: every caller passing an equal src shares the read.
func ReadRevisions(ctx context.Context, src RevisionReader, tenant, user string) (Revisions, error) {
	return memory.Memoized(ctx, revisionsKey{src, tenant, user}, func() (Revisions, error) {
		return src.ItemRevisions(ctx, tenant, user)
	})
}
