package cache_test

import (
	"fmt"
	"testing"

	"github.com/memgate/memgate/internal/engine/cache"
)

// benchKey is a cache key as Reads' and recall's answers are: a user's
// value as of a revision.
type benchKey = cache.Key[string]

// benchKeys are the keys of users users' perUser entries each.
func benchKeys(users, perUser int) [][]benchKey {
	ks := make([][]benchKey, users)
	for u := range ks {
		for i := range perUser {
			ks[u] = append(ks[u], benchKey{Tenant: "acme", User: fmt.Sprint("user-", u), Rev: 1, Of: fmt.Sprint("conversation-", i)})
		}
	}
	return ks
}

func benchCache(max int) *cache.Cache[benchKey, string] {
	return cache.New("bench", max, func(k benchKey, v string) int { return len(k.Of) + len(v) })
}

// BenchmarkCache: the hot path (a hit, a put that evicts) and an
// erasure's forgetting of one user among 1,000 (100,000 entries): one
// who has none, and one whose 100 entries are put back each time.
func BenchmarkCache(b *testing.B) {
	const users, perUser = 1000, 100
	ks := benchKeys(users, perUser)
	full := func() *cache.Cache[benchKey, string] {
		c := benchCache(1 << 30)
		for _, uk := range ks {
			for _, k := range uk {
				c.Put(k, "value")
			}
		}
		return c
	}
	b.Run("get-hit", func(b *testing.B) {
		c := full()
		i := 0
		for b.Loop() {
			c.Get(ks[i%users][i%perUser])
			i++
		}
	})
	b.Run("put-evicting", func(b *testing.B) {
		c := full()
		_, bytes := c.Usage()
		c = benchCache(bytes) // full at 100,000 entries: each new one evicts one
		for _, uk := range ks {
			for _, k := range uk {
				c.Put(k, "value")
			}
		}
		i := 0
		for b.Loop() {
			k := ks[i%users][i%perUser]
			k.Rev = int64(2 + i/(users*perUser))
			c.Put(k, "value")
			i++
		}
	})
	b.Run("forget-absent-user", func(b *testing.B) {
		c := full()
		for b.Loop() {
			c.Forget("acme", "nobody")
		}
	})
	b.Run("forget-100-entries", func(b *testing.B) {
		c := full()
		i := 0
		for b.Loop() {
			u := i % users
			c.Forget("acme", fmt.Sprint("user-", u))
			for _, k := range ks[u] {
				c.Put(k, "value")
			}
			i++
		}
	})
	b.Run("put-100-entries", func(b *testing.B) { // what forget-100-entries puts back
		c := full()
		i := 0
		for b.Loop() {
			for _, k := range ks[i%users] {
				c.Put(k, "value")
			}
			i++
		}
	})
}
