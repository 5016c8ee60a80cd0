package sqlitestore

// SetVectorCacheLimit replaces s's vector cache with an empty one bounded
// at max bytes.
func SetVectorCacheLimit(s *Store, max int) { s.vectors = newUserCache[*vecSet](max) }

// VectorCacheUsage reports how many keys s's vector cache holds and the
// bytes it accounts for them.
func VectorCacheUsage(s *Store) (keys, bytes int) {
	s.vectors.mu.Lock()
	defer s.vectors.mu.Unlock()
	return len(s.vectors.slots), s.vectors.bytes
}

// SetReadConns bounds s's read pool to n connections.
func SetReadConns(s *Store, n int) { s.read.SetMaxOpenConns(n) }
