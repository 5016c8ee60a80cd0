package memory

import (
	"context"
	"errors"
	"time"
)

// ErrErased reports a write a store refused because the user it is about was
// erased at or after the time the written data was captured (see
// WithErasureGuard). Nothing was stored; the caller drops the work.
var ErrErased = errors.New("user erased")

// guardKey is the context key of the erasure guards.
type guardKey struct{}

// guardUser names one user of a guard.
type guardUser struct{ tenant, user string }

// WithErasureGuard returns a context under which a store refuses every write
// about (tenant, user) — facts, summaries, memory items — when the user was
// erased at or after since, checking it in the same transaction as the write
// (and against an erasure that commits concurrently), so derived data of
// captured turns never outlives an erasure whatever the order of events.
//
// since is when the data being written was captured: the earliest At of the
// exchanges it derives from. Writers acting for captured exchanges — the
// after-save hooks, enrichment workers, an import — set it; writes without a
// guard (the management API acting now) are not checked. A second call for
// the same user keeps the earlier time. A zero since is ignored.
func WithErasureGuard(ctx context.Context, tenant, user string, since time.Time) context.Context {
	if since.IsZero() {
		return ctx
	}
	k := guardUser{tenant, user}
	old, _ := ctx.Value(guardKey{}).(map[guardUser]time.Time)
	if at, ok := old[k]; ok && !since.Before(at) {
		return ctx
	}
	m := make(map[guardUser]time.Time, len(old)+1)
	for u, at := range old {
		m[u] = at
	}
	m[k] = since
	return context.WithValue(ctx, guardKey{}, m)
}

// ErasureGuard returns the time WithErasureGuard set on ctx for (tenant,
// user), and whether one was set.
func ErasureGuard(ctx context.Context, tenant, user string) (time.Time, bool) {
	m, _ := ctx.Value(guardKey{}).(map[guardUser]time.Time)
	at, ok := m[guardUser{tenant, user}]
	return at, ok
}
