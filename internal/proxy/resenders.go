package proxy

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// resenderUsers bounds the users resenders remembers.
const resenderUsers = 16384

// resenders are the users whose requests were seen resending their
// history (a request naming no conversation whose implied one is derived,
// not the default one: memory.ImpliedConversation): their app sends full
// histories, so a later request of theirs that lands in the default
// conversation without earlier turns is a new chat's first turn
// (memory.Request.NewChat), not a newest-only client's next turn. The
// signal is this process's own, in an LRU of resenderUsers users keyed by
// a digest of tenant and user; safe for concurrent use.
type resenders struct {
	lru *lru.Cache[prefixKey, struct{}]
}

func newResenders() *resenders {
	c, _ := lru.New[prefixKey, struct{}](resenderUsers) // errors only on a size <= 0
	return &resenders{lru: c}
}

// resenderKey is a user's key in resenders.
func resenderKey(tenant, user string) prefixKey { return userKey("resender", tenant, user) }

// seen records that the user resent their history.
func (r *resenders) seen(tenant, user string) { r.lru.Add(resenderKey(tenant, user), struct{}{}) }

// resends reports whether the user was seen resending their history.
func (r *resenders) resends(tenant, user string) bool {
	_, ok := r.lru.Get(resenderKey(tenant, user))
	return ok
}

// forget drops the user's signal (erased, or a conversation deleted).
func (r *resenders) forget(tenant, user string) { r.lru.Remove(resenderKey(tenant, user)) }
