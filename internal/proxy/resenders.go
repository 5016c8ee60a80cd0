package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

const (
	// resenderUsers bounds the users resenders remembers.
	resenderUsers = 16384
	// resenderMaxAge is how long the shared signal outlives the newest
	// write of it: a user whose app resends its history goes on doing so,
	// and is seen again, by some process, within it.
	resenderMaxAge = 30 * 24 * time.Hour
	// resenderRefresh is how old a process's write of the signal may be
	// before the user's next sighting writes it again (refreshing its
	// expiry): once a day per process and user at most.
	resenderRefresh = 24 * time.Hour
)

// ResenderStore keeps the users seen resending their history where every
// gateway process sharing it reads them (implemented by
// internal/store/redis.Resenders). A user is named by a digest of their
// tenant and user (resenderKey); each call is one round trip, bounded by
// its context.
type ResenderStore interface {
	// Resends reports whether user was recorded.
	Resends(ctx context.Context, user [32]byte) (bool, error)
	// AddResender records user until ttl from now.
	AddResender(ctx context.Context, user [32]byte, ttl time.Duration) error
	// ForgetResender drops what was recorded of user.
	ForgetResender(ctx context.Context, user [32]byte) error
}

// resenders are the users whose requests were seen resending their
// history (a request naming no conversation whose implied one is derived,
// not the default one: memory.ImpliedConversation): their app sends full
// histories, so a later request of theirs that lands in the default
// conversation without earlier turns is a new chat's first turn
// (memory.Request.NewChat), not a newest-only client's next turn. The
// signal is kept in two tiers: this process's, in an LRU of resenderUsers
// users keyed by a digest of tenant and user, checked first; and, with a
// ResenderStore (Redis), the one the gateway processes share, so that a
// new chat's first turn reaching a process that never saw its user
// resend is told too. A process writes a user there the first time it
// sees them resend (again once its write is resenderRefresh old), in the
// background; it reads a user there, for a request its own tier cannot
// tell, beside the request's memory loads (ask). Safe for concurrent use.
type resenders struct {
	lru *lru.Cache[prefixKey, *resender]
	// shared is the signal the processes share (nil: none); timeout
	// bounds each write and deletion of it.
	shared  ResenderStore
	timeout time.Duration
	now     func() time.Time
	// failed is told of each shared write that failed.
	failed func(err error)
	// mu orders forgetting against what a shared read or write brings
	// back: gen counts the forgets, so that neither a read
	// begun before one puts the user back in this process's tier nor a
	// write begun before one stays in the shared one.
	mu     sync.Mutex
	gen    uint64
	writes sync.WaitGroup
}

// resender is a user seen resending, in this process's tier.
type resender struct {
	// writing: a write of the shared signal is under way.
	writing atomic.Bool
	// shared is when this process last wrote the user to the shared
	// signal, in Unix nanoseconds (0: never).
	shared atomic.Int64
}

// newResenders returns the resenders of one process, sharing the signal
// through shared (nil: none), each write and deletion of it bounded by
// timeout, a failed write told to failed.
func newResenders(shared ResenderStore, timeout time.Duration, now func() time.Time, failed func(error)) *resenders {
	c, _ := lru.New[prefixKey, *resender](resenderUsers) // errors only on a size <= 0
	return &resenders{lru: c, shared: shared, timeout: timeout, now: now, failed: failed}
}

// resenderKey is a user's key in resenders, and in the shared signal.
func resenderKey(tenant, user string) prefixKey { return userKey("resender", tenant, user) }

// seen records that the user resent their history: in this process's
// tier, and, the first time (or once this process's write is
// resenderRefresh old), in the shared one, in the background.
func (r *resenders) seen(tenant, user string) {
	// The forgets counted before the user goes into this process's tier:
	// one landing from here on, before the shared write, undoes it.
	r.mu.Lock()
	gen := r.gen
	r.mu.Unlock()
	k := resenderKey(tenant, user)
	e, ok := r.lru.Get(k)
	if !ok {
		e = &resender{}
		if prev, found, _ := r.lru.PeekOrAdd(k, e); found {
			e = prev
		}
	}
	if r.shared == nil {
		return
	}
	at := r.now()
	if last := e.shared.Load(); last != 0 && at.Sub(time.Unix(0, last)) < resenderRefresh {
		return
	}
	if !e.writing.CompareAndSwap(false, true) {
		return
	}
	r.writes.Go(func() {
		defer e.writing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		if err := r.shared.AddResender(ctx, k, resenderMaxAge); err != nil {
			r.failed(err)
			return
		}
		r.mu.Lock()
		forgot := r.gen != gen
		r.mu.Unlock()
		if forgot {
			// A forget (of this user, or of another: a deletion at
			// worst, which the user's next sighting undoes) came while
			// the write was under way, and may have deleted the signal
			// before it landed: it does not stay.
			_ = r.shared.ForgetResender(ctx, k)
			return
		}
		e.shared.Store(at.UnixNano())
	})
}

// resends reports whether this process's tier holds the user.
func (r *resenders) resends(tenant, user string) bool {
	_, ok := r.lru.Get(resenderKey(tenant, user))
	return ok
}

// ask returns the question whether the shared signal holds the user
// (memory.Request.AskNewChat), for a request this process's tier cannot
// tell; nil without a shared signal. A user it finds is added to this
// process's tier, unless forgotten meanwhile.
func (r *resenders) ask(tenant, user string) func(ctx context.Context) (bool, error) {
	if r.shared == nil {
		return nil
	}
	k := resenderKey(tenant, user)
	return func(ctx context.Context) (bool, error) {
		r.mu.Lock()
		gen := r.gen
		r.mu.Unlock()
		ok, err := r.shared.Resends(ctx, k)
		if !ok || err != nil {
			return false, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.gen == gen {
			r.lru.ContainsOrAdd(k, &resender{})
		}
		return true, nil
	}
}

// forget drops the user's signal (erased, or a conversation deleted):
// this process's, and the shared one (within the timeout).
func (r *resenders) forget(ctx context.Context, tenant, user string) error {
	k := resenderKey(tenant, user)
	r.mu.Lock()
	r.gen++
	r.lru.Remove(k)
	r.mu.Unlock()
	if r.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.shared.ForgetResender(ctx, k)
}

// clear drops this process's tier (erasures may have been missed); the
// shared one, which the erasing process deleted from, stays, and so does
// a shared write under way: a clear comes each time the erasure notices'
// subscription starts, the first time after a new process began serving,
// and is no forget (only those undo a write, seen).
func (r *resenders) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lru.Purge()
}

// wait waits for the shared writes under way.
func (r *resenders) wait() { r.writes.Wait() }
