package enrich

import "sync"

// failureCounts counts consecutive summariser failures per key.
type failureCounts struct {
	mu sync.Mutex
	m  map[string]int
}

// maxTracked bounds the conversations whose failures are remembered.
const maxTracked = 10000

// inc records a failure and returns the consecutive count.
func (f *failureCounts) inc(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxTracked {
		f.m = map[string]int{}
	}
	f.m[key]++
	return f.m[key]
}

// reset forgets key's failures.
func (f *failureCounts) reset(key string) {
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
}
