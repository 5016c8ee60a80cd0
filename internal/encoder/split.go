package encoder

import (
	"sync"
	"sync/atomic"
)

// cores is how many goroutines one Embed call may spread its products
// over (at least 1): the calling one, and cores-1 helpers.
//
// The work is cut into more parts than goroutines, and every goroutine,
// the caller's included, claims the next unclaimed part until none is
// left; the caller waits only for the parts already claimed. A helper
// that starts late (no idle core, a busy machine) finds nothing left
// and returns, so splitting never makes a call wait for a core it does
// not get: at worst the caller does all the parts itself, as with one
// core.
//
// Each part writes its own rows or columns of the result with the same
// library calls as one goroutine would, so a vector does not depend on
// how many cores computed it (TestEmbedSameOnAnyCores holds it to the
// bit).
type cores int

// run calls fn(i) for every i in [0, n), on up to c goroutines.
func (c cores) run(n int, fn func(i int)) {
	if c <= 1 || n <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var (
		next atomic.Int64
		done sync.WaitGroup
	)
	done.Add(n)
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return
			}
			fn(i)
			done.Done()
		}
	}
	for range min(int(c), n) - 1 {
		go work()
	}
	work()
	done.Wait()
}

// minSplitMACs is the least work (multiply-adds) a product must hold to
// be split over cores: below it, waking a helper costs about what it
// saves.
const minSplitMACs = 1 << 18
