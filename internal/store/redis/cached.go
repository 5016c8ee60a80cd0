package redis

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
)

// Cached is a PostgreSQL store whose conversations' recent windows a Cache
// keeps in Redis: the Cache's methods where it caches (the recent windows,
// and the saves, deletes and moves after which it brings them up to date,
// and the footprint that counts them), the store's own for everything else.
// The two are embedded, not wrapped: no method is forwarded by hand, and a
// method the store gains is Cached's at once. The methods below only pick
// the Cache where both have one.
type Cached struct {
	*postgres.Store
	*Cache
}

// SaveExchange is the Cache's.
func (s Cached) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	return s.Cache.SaveExchange(ctx, ex)
}

// SaveExchanges is the Cache's.
func (s Cached) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	return s.Cache.SaveExchanges(ctx, exs)
}

// Recent is the Cache's.
func (s Cached) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	return s.Cache.Recent(ctx, id, n)
}

// DeleteConversation is the Cache's.
func (s Cached) DeleteConversation(ctx context.Context, id memory.Identity) error {
	return s.Cache.DeleteConversation(ctx, id)
}

// DeleteUser is the Cache's.
func (s Cached) DeleteUser(ctx context.Context, tenant, user string) error {
	return s.Cache.DeleteUser(ctx, tenant, user)
}

// Adopt is the Cache's.
func (s Cached) Adopt(ctx context.Context, to memory.Identity, prior []memory.Message) (int, error) {
	return s.Cache.Adopt(ctx, to, prior)
}

// Footprint is the Cache's.
func (s Cached) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	return s.Cache.Footprint(ctx, tenant, user)
}
