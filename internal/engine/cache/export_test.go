package cache

import "github.com/memgate/memgate/internal/memory"

// HoldTail keeps msgs as the conversation's newest turns at the Tail
// count rev, as a Recent would.
func HoldTail(r *Reads, id memory.Identity, rev int64, msgs []memory.Message, all bool) {
	r.tails.Put(convKey{id.Tenant, id.User, rev, id.Conversation}, tail{msgs: msgs, all: all})
}

// TailBytes is what r's tails account for.
func TailBytes(r *Reads) int { _, b := r.tails.Usage(); return b }

// HoldsFacts reports whether r holds the user's facts at the Facts count
// rev.
func HoldsFacts(r *Reads, tenant, user string, rev int64) bool {
	_, ok := r.facts.Get(convKey{tenant, user, rev, ""})
	return ok
}

// HoldsSummary reports whether r holds id's latest summary at the
// Summaries count rev.
func HoldsSummary(r *Reads, id memory.Identity, rev int64) bool {
	_, ok := r.summaries.Get(convKey{id.Tenant, id.User, rev, id.Conversation})
	return ok
}

// HeldOf is how many entries r holds of the user (tails, facts, summaries,
// heads).
func HeldOf(r *Reads, tenant, user string) int {
	return ownedBy(r.tails, tenant, user) + ownedBy(r.facts, tenant, user) +
		ownedBy(r.summaries, tenant, user) + ownedBy(r.heads, tenant, user)
}

// ownedBy is how many entries c holds of the user.
func ownedBy[K Owned, V any](c *Cache[K, V], tenant, user string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	if o := c.owners[Owner{tenant, user}]; o != nil {
		for e := o.first; e != nil; e = e.nextOwned {
			n++
		}
	}
	return n
}
