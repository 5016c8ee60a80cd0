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
	cache.RevisionReader
	MessagesAround(ctx context.Context, rev *memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error)
}

// Cached returns s read as the gateway reads it: its recent turns, facts
// and summaries through the engine's cache (cache.Reads), each read a
// request of its own that reads the user's revision counters first, and
// its saves and erasures reaching the cache. The freshness suite runs on
// it, so that what the cache keeps follows every change as the store
// does.
func Cached(s Revisioned) KnowledgeStore {
	return CachedWith(s, nil, cache.DefaultTailBytes)
}

// CachedWith is Cached with conversations' newest turns kept in tier too
// (cache.TailTier), below tailBytes of memory (0: none, every read asks
// tier first).
func CachedWith(s Revisioned, tier cache.TailTier, tailBytes int) KnowledgeStore {
	return cachedStore{Revisioned: s, reads: cache.NewReads(s, tier, tailBytes, cache.DefaultKnowledgeBytes)}
}

type cachedStore struct {
	Revisioned
	reads *cache.Reads
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

func (s cachedStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := s.Revisioned.SaveExchange(ctx, ex)
	if err == nil {
		s.reads.Saved([]memory.Exchange{ex}, []memory.SaveResult{res})
	}
	return res, err
}

// SaveExchanges is s's group commit when it has one, else its exchanges
// saved one by one.
func (s cachedStore) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	gs, ok := s.Revisioned.(groupSaver)
	if !ok {
		out := make([]memory.SaveResult, 0, len(exs))
		for _, ex := range exs {
			res, err := s.SaveExchange(ctx, ex)
			if err != nil {
				return nil, err
			}
			out = append(out, res)
		}
		return out, nil
	}
	res, err := gs.SaveExchanges(ctx, exs)
	if err == nil {
		s.reads.Saved(exs, res)
	}
	return res, err
}

func (s cachedStore) DeleteUser(ctx context.Context, tenant, user string) error {
	err := s.Revisioned.DeleteUser(ctx, tenant, user)
	s.reads.Forget(tenant, user)
	return err
}
