package cache

import (
	"context"
	"errors"
	"sync"
)

// ErrErased is the cause of a call Calls refused or cancelled: an owner
// of the text it carries was erased (or one of their conversations
// deleted) since the text was read.
var ErrErased = errors.New("owner erased since their text was read")

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
// cause ErrErased when any of them is forgotten before end is called,
// and end, which the caller calls once the call is over. The text was
// read at ctx's epoch (EpochOf: an enrichment round's, taken before it
// read its batch; else now): when an owner was forgotten since, Begin
// returns an error wrapping ErrErased and the call must not be made.
// The zero Owner (no user's text) is forgotten only by a Clear.
func (c *Calls) Begin(ctx context.Context, owners ...Owner) (_ context.Context, end func(), err error) {
	if c == nil {
		return ctx, func() {}, nil
	}
	epoch := EpochOf(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range owners {
		if c.erased.Since(o, epoch) {
			return ctx, func() {}, ErrErased
		}
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
// erasure notice subscription lost).
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
			k.cancel(ErrErased)
		}
	}
}
