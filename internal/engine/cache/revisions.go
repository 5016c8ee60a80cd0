package cache

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// Revisions are a user's revision counters (memory.Revisions): what every
// entry of a cache is keyed by.
type Revisions = memory.Revisions

// RevisionReader reads a user's Revisions, in one lookup.
type RevisionReader interface {
	ItemRevisions(ctx context.Context, tenant, user string) (Revisions, error)
}
