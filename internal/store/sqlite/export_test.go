package sqlite

import (
	"time"

	"github.com/memgate/memgate/internal/itemindex"
)

// SetVectorCacheLimit replaces s's in-memory index with an empty one whose
// vector cache is bounded at max bytes.
func SetVectorCacheLimit(s *Store, max int) {
	lim := itemindex.DefaultLimits
	lim.Vectors = max
	s.SetCacheLimits(lim)
}

// VectorCacheUsage reports how many keys s's vector cache holds and the
// bytes it accounts for them.
func VectorCacheUsage(s *Store) (keys, bytes int) { return s.index.VectorUsage() }

// SetReadConns bounds s's read pool to n connections.
func SetReadConns(s *Store, n int) { s.read.SetMaxOpenConns(n) }

// SetEraseChunks makes each chunk of s's erasures delete one batch, and
// calls hook after each (an error stops the erasure there).
func SetEraseChunks(s *Store, hook func(chunk int) error) {
	s.eraseBudget = 0
	s.afterChunk = hook
}

// SetChatLockTTL sets how long s's chat locks last unrenewed.
func SetChatLockTTL(s *Store, ttl time.Duration) { s.chatLockTTL = ttl }

// SetChatLockClock sets the clock s's chat locks are taken and renewed by.
func SetChatLockClock(s *Store, now func() time.Time) { s.chatLockNow = now }

// SetReadHook makes s call hook between an inspector read's statement and
// its answer.
func SetReadHook(s *Store, hook func()) { s.afterRead = hook }

// StopResuming ends s's background rounds of erasures under way
// (resumeErasures), as Close does, for a test whose erasure hooks are
// meant for its own DeleteUser call only: the round Open starts may run
// late, find the test's erasure under way and finish it too, calling the
// hooks a second time from its own goroutine.
func StopResuming(s *Store) {
	if s.stop != nil {
		close(s.stop)
		<-s.resumed
		s.stop = nil
	}
}
