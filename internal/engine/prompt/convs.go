package prompt

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// convTable is an LRU of one value per conversation (the kept recall
// blocks, the held summaries), which holds what was recalled and
// summarised of its user: their erasure, or the deletion of one of their
// conversations, empties it of theirs (forget). It records its forgets,
// so that a request whose parts loaded before its user's puts nothing of
// theirs after it (epoch, checked by the puts under mu: forgotSince),
// while other users' requests keep theirs. mu guards the values too,
// which their owners may change in place.
type convTable[V any] struct {
	mu     sync.Mutex
	convs  *lru.Cache[memory.Identity, V]
	erased cache.Erasures
}

// newConvTable returns an empty table of at most n conversations (1 at
// least).
func newConvTable[V any](n int) convTable[V] {
	c, err := lru.New[memory.Identity, V](max(n, 1))
	if err != nil { // only for a size below 1
		panic(err)
	}
	return convTable[V]{convs: c}
}

// epoch returns the count of forgets, read before a request's parts load.
func (t *convTable[V]) epoch() uint64 { return t.erased.Epoch() }

// forgotSince reports whether id's user may have been forgotten since the
// count epoch; t.mu is held.
func (t *convTable[V]) forgotSince(id memory.Identity, epoch uint64) bool {
	return t.erased.Since(cache.Owner{Tenant: id.Tenant, User: id.User}, epoch)
}

// forget drops the user's conversations, visiting every one held (an
// erasure is rare; the table is bounded).
func (t *convTable[V]) forget(tenant, user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.erased.Forget(cache.Owner{Tenant: tenant, User: user})
	for _, id := range t.convs.Keys() {
		if id.Tenant == tenant && id.User == user {
			t.convs.Remove(id)
		}
	}
}

// clear drops every conversation (erasures may have been missed).
func (t *convTable[V]) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.erased.Clear()
	t.convs.Purge()
}
