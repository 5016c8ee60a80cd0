// Package seen remembers recently seen keys, up to a bound, so work that
// was already done (a fact pinned, a summary indexed) is not done again.
package seen

import "sync"

// Set remembers up to Max keys, forgetting the oldest first. The zero value
// with Max set is ready to use; it is safe for concurrent use.
type Set struct {
	Max int

	mu    sync.Mutex
	m     map[string]bool
	order []string
}

// Has reports whether key was added and is still remembered.
func (s *Set) Has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// Add remembers key.
func (s *Set) Add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]bool{}
	}
	if s.m[key] {
		return
	}
	s.m[key] = true
	s.order = append(s.order, key)
	if len(s.order) > s.Max {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
}
