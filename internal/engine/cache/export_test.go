package cache

import "github.com/memgate/memgate/internal/memory"

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
