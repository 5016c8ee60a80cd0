package record

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// PurgeLedger keeps the queue purges not known to be done
// (memory.PendingPurge), keyed by tombstone digest, so that a purge left
// pending when a process stops, or failing, is not lost. A store's
// erasure and conversation deletion record theirs in the transaction
// that writes their tombstone (storetest.RunErasurePurges): no tombstone
// commits without it. The Capturer goes through what it lists
// (retryPurges), at start, every Options.PurgeSweep and while the queues
// fail, and records each purge done once one covering it went through.
// sqlite.Store and postgres.Store implement it; without one the Capturer
// keeps its purges in memory (memLedger).
type PurgeLedger interface {
	AddPendingPurge(ctx context.Context, p memory.PendingPurge) error
	PendingPurges(ctx context.Context, limit int) ([]memory.PendingPurge, error)
	DonePurges(ctx context.Context, ps []memory.PendingPurge) error
}

// sweepBatch is how many pending purges one sweep reads from the ledger
// and covers with one scan of each queue.
const sweepBatch = 256

// pendingOf is the ledger's record of the purge of k as of at.
func pendingOf(k purgeKey, at time.Time) memory.PendingPurge {
	if k.conversation == "" {
		return memory.PendingPurge{Key: memory.UserTombstone(k.tenant, k.user), At: at}
	}
	id := memory.Identity{Tenant: k.tenant, User: k.user, Conversation: k.conversation}
	return memory.PendingPurge{Key: memory.ConversationTombstone(id), Conversation: true, At: at}
}

// owe records in the ledger that the purge of k as of at is not done (an
// attempt failed, or none was made while the queues fail), and wakes
// retryPurges. A store's erasure recorded it already, with its
// tombstone (this moves nothing then); the memory ledger learns of it
// here. A ledger that fails is logged: the purge's entries are refused
// when they are processed all the same.
func (c *Capturer) owe(k purgeKey, at time.Time) {
	// Not c.ctx: a purge the closing Capturer does not try is recorded too.
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.OpTimeout)
	defer cancel()
	if err := c.ledger.AddPendingPurge(ctx, pendingOf(k, at)); err != nil {
		c.logger.Warn("queue purge not recorded as pending; its entries are refused when processed", "tenant", k.tenant, "err", err)
	}
	c.purges.owed()
}

// recordDone records in the ledger that the purge of k as of at went
// through. A ledger that fails leaves it listed: a later sweep purges
// again, which finds nothing more.
func (c *Capturer) recordDone(k purgeKey, at time.Time) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	defer cancel()
	if err := c.ledger.DonePurges(ctx, []memory.PendingPurge{pendingOf(k, at)}); err != nil {
		c.logger.Warn("queue purge done, but not recorded so in the store; a later sweep purges again", "tenant", k.tenant, "err", err)
	}
}

// sweep reads up to sweepBatch pending purges from the ledger and covers
// them with one purge of each queue, matching the queued entries' ids by
// their tombstone digests (the ledger holds no id); once it went through,
// it records them done (the Scrubber told, as after every purge). It
// returns the purge's error (the queues failed), and whether the ledger
// may list more (it read a full batch). A ledger that fails is logged,
// and waits for the next sweep.
func (c *Capturer) sweep() (more bool, err error) {
	ctx, cancel := context.WithTimeout(c.ctx, purgeTimeout)
	defer cancel()
	ps, err := c.ledger.PendingPurges(ctx, sweepBatch)
	if err != nil {
		c.logger.Warn("cannot read the pending queue purges from the store; trying again later", "err", err)
		return false, nil
	}
	c.purges.list(len(ps))
	if len(ps) == 0 {
		return false, nil
	}
	users, convs := map[string]time.Time{}, map[string]time.Time{}
	for _, p := range ps {
		if p.Conversation {
			convs[string(p.Key)] = p.At
		} else {
			users[string(p.Key)] = p.At
		}
	}
	voided := func(o queuedOwner) bool {
		if at, ok := users[string(memory.UserTombstone(o.Tenant, o.User))]; ok && !o.At.After(at) {
			return true
		}
		if len(convs) == 0 {
			return false
		}
		at, ok := convs[string(memory.ConversationTombstone(memory.Identity{Tenant: o.Tenant, User: o.User, Conversation: o.Conversation}))]
		return ok && !cmp.Or(o.Received, o.At).After(at)
	}
	conv := func(id memory.Identity) bool {
		_, u := users[string(memory.UserTombstone(id.Tenant, id.User))]
		_, cv := convs[string(memory.ConversationTombstone(id))]
		return u || cv
	}
	n, err := c.purge(ctx, "", "", voided, conv, func() {})
	c.purges.settle(err)
	if err != nil {
		return false, err
	}
	if err := c.ledger.DonePurges(ctx, ps); err != nil {
		c.logger.Warn("pending queue purges done, but not recorded so in the store; a later sweep purges again", "err", err)
		return false, nil
	}
	c.purges.list(0)
	c.logger.Info("pending queue purges done", "purges", len(ps), "turns", n.Turns, "enrichments", n.Enrichments)
	return len(ps) == sweepBatch, nil
}

// memLedger is the PurgeLedger of a Capturer given none: the purges not
// done, in this process's memory (lost with it), each digest once at its
// latest time. Past maxPendingPurges the oldest is given up (gaveUp is
// told how many): its entries are refused when processed. It is safe for
// concurrent use.
type memLedger struct {
	gaveUp func(n int)

	mu sync.Mutex
	ps map[string]memory.PendingPurge
}

func newMemLedger(gaveUp func(int)) *memLedger {
	return &memLedger{gaveUp: gaveUp, ps: map[string]memory.PendingPurge{}}
}

// AddPendingPurge records p, at the later of its times.
func (l *memLedger) AddPendingPurge(_ context.Context, p memory.PendingPurge) error {
	l.mu.Lock()
	k, gone := string(p.Key), 0
	if old, ok := l.ps[k]; ok {
		if p.At.After(old.At) {
			l.ps[k] = p
		}
	} else {
		for len(l.ps) >= maxPendingPurges {
			delete(l.ps, string(slices.MinFunc(l.all(), oldestFirst).Key))
			gone++
		}
		l.ps[k] = p
	}
	l.mu.Unlock()
	if gone > 0 {
		l.gaveUp(gone)
	}
	return nil
}

// PendingPurges returns up to limit of the purges recorded, oldest first.
func (l *memLedger) PendingPurges(_ context.Context, limit int) ([]memory.PendingPurge, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.all()
	slices.SortFunc(ps, oldestFirst)
	return ps[:min(limit, len(ps))], nil
}

// DonePurges forgets each of ps unless it was recorded again since at a
// later time.
func (l *memLedger) DonePurges(_ context.Context, ps []memory.PendingPurge) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		if cur, ok := l.ps[string(p.Key)]; ok && !cur.At.After(p.At) {
			delete(l.ps, string(p.Key))
		}
	}
	return nil
}

// drop forgets every purge recorded, returning how many.
func (l *memLedger) drop() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.ps)
	clear(l.ps)
	return n
}

// all is every purge recorded, in no order; l.mu is held.
func (l *memLedger) all() []memory.PendingPurge {
	ps := make([]memory.PendingPurge, 0, len(l.ps))
	for _, p := range l.ps {
		ps = append(ps, p)
	}
	return ps
}

// oldestFirst orders purges as the stores list them: by time, then digest.
func oldestFirst(a, b memory.PendingPurge) int {
	return cmp.Or(a.At.Compare(b.At), bytes.Compare(a.Key, b.Key))
}
