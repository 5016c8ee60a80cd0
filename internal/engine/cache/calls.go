package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrErased is the cause of a call Calls refused or cancelled: an owner
// of the text it carries was erased (or one of their conversations
// deleted) since the text was read.
var ErrErased = errors.New("owner erased since their text was read")

// ErrCleared is the cause of a call Calls refused or cancelled because
// every owner's may have been erased (Clear: an erasure notice
// subscription lost; or too many erasures since the text was read to
// know whose), with no known erasure of its own owners: the caller asks
// the store whether they were erased, and when not makes the call again
// with a fresh epoch (Do), rather than dropping the work.
var ErrCleared = errors.New("erasures may have been missed since the text was read")

// Calls keeps the outbound calls in flight that carry users' stored text
// to a third party (the side model's fact extraction and summaries, the
// embedder), per owner, so that an erasure in this process — served here,
// or noticed from another process — cancels them before it answers
// (Forget), and a call that would start after it with text read before it
// never starts (Begin). It is a Forgetter: wired among the caches an
// erasure forgets the user from, it is reached by both paths. The nil
// Calls keeps none and refuses none. It is safe for concurrent use.
type Calls struct {
	mu     sync.Mutex
	erased Erasures
	live   map[Owner]map[*call]struct{}
}

// call is one call in flight: its cancel, with the owners it carries.
type call struct {
	cancel context.CancelCauseFunc
	owners []Owner
}

// NewCalls returns a Calls with no call in flight.
func NewCalls() *Calls {
	return &Calls{live: map[Owner]map[*call]struct{}{}}
}

// Begin returns ctx for a call carrying the owners' text, cancelled with
// cause ErrErased when any of them is forgotten before end is called (or
// ErrCleared by a Clear), and end, which the caller calls once the call
// is over. The text was read at ctx's epoch (EpochOf: an enrichment
// round's, taken before it read its batch; else now): when an owner was
// forgotten since, Begin returns ErrErased and the call must not be made;
// when only a Clear or the Erasures' floor came since, ErrCleared. The
// zero Owner (no user's text) is forgotten only by a Clear.
func (c *Calls) Begin(ctx context.Context, owners ...Owner) (_ context.Context, end func(), err error) {
	if c == nil {
		return ctx, func() {}, nil
	}
	epoch := EpochOf(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	cleared := false
	for _, o := range owners {
		if c.erased.Forgot(o, epoch) {
			return ctx, func() {}, ErrErased
		}
		cleared = cleared || c.erased.Since(o, epoch)
	}
	if cleared {
		return ctx, func() {}, ErrCleared
	}
	cctx, cancel := context.WithCancelCause(ctx)
	k := &call{cancel: cancel, owners: owners}
	for _, o := range owners {
		if c.live[o] == nil {
			c.live[o] = map[*call]struct{}{}
		}
		c.live[o][k] = struct{}{}
	}
	return cctx, func() {
		c.mu.Lock()
		c.drop(k)
		c.mu.Unlock()
		cancel(nil)
	}, nil
}

// drop removes k from every owner's calls; c.mu is held.
func (c *Calls) drop(k *call) {
	for _, o := range k.owners {
		delete(c.live[o], k)
		if len(c.live[o]) == 0 {
			delete(c.live, o)
		}
	}
}

// Forget cancels the calls in flight carrying the user's text, and makes
// Begin refuse those whose text was read before now. It returns once
// their contexts are cancelled (not once the calls returned).
func (c *Calls) Forget(tenant, user string) {
	if c == nil {
		return
	}
	o := Owner{Tenant: tenant, User: user}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erased.Forget(o)
	for k := range c.live[o] {
		c.drop(k)
		k.cancel(ErrErased)
	}
}

// Clear is Forget of every owner (erasures may have been missed: an
// erasure notice subscription lost), with cause ErrCleared.
func (c *Calls) Clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erased.Clear()
	for _, ks := range c.live {
		for k := range ks {
			c.drop(k)
			k.cancel(ErrCleared)
		}
	}
}

// doAttempts bounds how many times Do makes a call that Clears keep
// cancelling.
const doAttempts = 3

// Do makes call under Begin's context for the owners' text, read at
// ctx's epoch, and returns its error, or one wrapping ErrErased when an
// owner was forgotten since the text was read (the call refused, or
// cancelled in flight). Refused or cancelled by a Clear or the floor
// (ErrCleared), it asks erased whether an owner was really erased since
// the text was read (the store's record: ErasedAt), and when not makes
// the call again under a fresh epoch, taken before it asked, so that an
// erasure after the answer still refuses or cancels it; up to doAttempts
// times, then it returns an error wrapping ErrCleared, for the caller to
// retry. With erased nil, ErrCleared is returned at once.
func (c *Calls) Do(ctx context.Context, erased func(context.Context) (bool, error), call func(context.Context) error, owners ...Owner) error {
	for attempt := 1; ; attempt++ {
		cctx, end, err := c.Begin(ctx, owners...)
		if err == nil {
			err = call(cctx)
			cause := context.Cause(cctx)
			end()
			if errors.Is(cause, ErrErased) || errors.Is(cause, ErrCleared) {
				err = cause
			}
		}
		if !errors.Is(err, ErrCleared) {
			return err
		}
		if erased == nil || attempt >= doAttempts {
			return fmt.Errorf("call of %d owners: %w", len(owners), ErrCleared)
		}
		epoch := Epoch()
		gone, cerr := erased(ctx)
		if cerr != nil {
			return fmt.Errorf("check erasure after %w: %w", ErrCleared, cerr)
		}
		if gone {
			return fmt.Errorf("call of %d owners: %w", len(owners), ErrErased)
		}
		ctx = WithEpoch(ctx, epoch)
	}
}
