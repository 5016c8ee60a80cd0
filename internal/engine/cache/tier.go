package cache

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// TailTier is a second level below the memory that keeps conversations'
// newest turns, shared by every gateway process (Redis: see
// internal/store/redis's Tails). A tail is kept there under the same
// revision as in memory (Revisions.Tail), so what one process read from the
// store another finds, and none is ever served at a later revision. A
// TailTier never fails its caller: what it cannot read is a miss, what it
// cannot keep is dropped, and it logs why.
type TailTier interface {
	// Tail returns the newest live messages of id's conversation kept at
	// rev, oldest first, and whether they are all its live messages; ok is
	// false when none are kept at rev.
	Tail(ctx context.Context, id memory.Identity, rev int64) (msgs []memory.Message, all, ok bool)
	// KeepTail keeps msgs, read at rev, as id's conversation's newest live
	// messages (all of them when all is set).
	KeepTail(ctx context.Context, id memory.Identity, rev int64, msgs []memory.Message, all bool)
}
