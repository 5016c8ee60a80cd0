package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
)

// Cached is a PostgreSQL store whose conversations' newest turns are also
// kept in Redis (Tails, the engine cache's second tier): the store's
// methods, but for the deletes, which also delete what Redis keeps of the
// user, and the footprint, which counts it. Everything Tails keeps is kept
// under the revision of the user's messages it was read at, so no save
// needs to touch Redis: a save moves the revision.
type Cached struct {
	*postgres.Store
	Tails *Tails
}

// DeleteConversation deletes the conversation from the store, then every
// tail kept of its user (none is current after the delete, see forget),
// even when the store reports memory.ErrNotFound.
func (s Cached) DeleteConversation(ctx context.Context, id memory.Identity) error {
	err := s.Store.DeleteConversation(ctx, id)
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return err
	}
	if ferr := s.forget(ctx, id.Tenant, id.User); ferr != nil {
		return ferr
	}
	return err
}

// DeleteUser erases the user in the store, then every tail kept of theirs
// (see forget), and last empties the embedding cache kept under the same
// prefix, which names no owner (see EmbeddingCache). It returns an error
// wrapping memory.ErrUnavailable when Redis could not be cleared: erased
// data must not stay there.
func (s Cached) DeleteUser(ctx context.Context, tenant, user string) error {
	if err := s.Store.DeleteUser(ctx, tenant, user); err != nil {
		return err
	}
	if err := s.forget(ctx, tenant, user); err != nil {
		return err
	}
	if _, err := clearEmbeddings(ctx, s.Tails.rdb, s.Tails.prefix); err != nil {
		return fmt.Errorf("redis: erase: %w", err)
	}
	return nil
}

// forget deletes every tail kept of the user after a delete of their
// messages, refusing any read before it (Tails.Forget at their Tail
// revision after it; or at every revision, for the TTL, when that cannot
// be read).
func (s Cached) forget(ctx context.Context, tenant, user string) error {
	after := int64(math.MaxInt64)
	if rev, err := s.Store.ItemRevisions(ctx, tenant, user); err == nil {
		after = rev.Tail()
	}
	return s.Tails.Forget(ctx, tenant, user, after)
}

// Footprint counts the store's rows of the user and the conversations'
// tails of theirs Redis keeps.
func (s Cached) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	f, err := s.Store.Footprint(ctx, tenant, user)
	if err != nil {
		return f, err
	}
	if f.CachedWindows, err = s.Tails.Count(ctx, tenant, user); err != nil {
		return f, fmt.Errorf("redis: count kept tails: %w", err)
	}
	return f, nil
}

// Collectors returns the store's collectors and Tails'.
func (s Cached) Collectors() []prometheus.Collector {
	return slices.Concat(s.Store.Collectors(), s.Tails.Collectors())
}
