package cache_test

import "github.com/memgate/memgate/internal/engine/cache"

// forget drops the user's entries as an erasure does.
func forget(c *cache.Cache[benchKey, string], tenant, user string) {
	c.Forget(tenant, user)
}
