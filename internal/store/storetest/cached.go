package storetest

import (
	"context"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// Revisioned is a store that reads a user's revision counters.
type Revisioned interface {
	KnowledgeStore
	ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error)
	cache.Store
	MessagesAround(ctx context.Context, rev *memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error)
}

// Cached returns s read as the gateway reads it: its recent turns, facts,
// summaries and conversations' first messages (Head) through the engine's
// cache (cache.Reads), each read a
// request of its own that reads the user's revision counters first, and
// its saves and erasures reaching the cache. The freshness suite runs on
// it, so that what the cache keeps follows every change as the store
// does.
func Cached(s Revisioned) KnowledgeStore {
	return cachedStore{Revisioned: s, reads: cache.NewReads(s, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)}
}

type cachedStore struct {
	Revisioned
	reads *cache.Reads // saves and erasures go through it, as the gateway wires them
}

// rev reads the user's revision counters, as a request does before its
// reads (nil when the lookup fails: the read goes to the store).
func (s cachedStore) rev(ctx context.Context, tenant, user string) *memory.Revisions {
	r, err := s.ItemRevisions(ctx, tenant, user)
	if err != nil {
		return nil
	}
	return &r
}

func (s cachedStore) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	return s.reads.Recent(ctx, s.rev(ctx, id.Tenant, id.User), id, n)
}

func (s cachedStore) LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error) {
	return s.reads.LatestSummary(ctx, s.rev(ctx, id.Tenant, id.User), id)
}

func (s cachedStore) Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	return s.reads.Facts(ctx, s.rev(ctx, tenant, user), tenant, user, now, history)
}

// Head reads the prints of a conversation's first n live messages through
// the cache, as a request's routing reads them.
func (s cachedStore) Head(ctx context.Context, id memory.Identity, n int) ([]memory.Print, error) {
	return s.reads.Head(ctx, s.rev(ctx, id.Tenant, id.User), id, n)
}

func (s cachedStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	return s.reads.SaveExchange(ctx, ex)
}

func (s cachedStore) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	return s.reads.SaveExchanges(ctx, exs)
}

func (s cachedStore) DeleteUser(ctx context.Context, tenant, user string) error {
	return s.reads.DeleteUser(ctx, tenant, user)
}
