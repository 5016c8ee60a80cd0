package record

import (
	"cmp"
	"context"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// PurgeLedger keeps, in the store, the queue purges not known to be done
// (memory.PendingPurge), keyed by tombstone digest, so that a purge left
// pending when a process stops, or given up, is not lost: every process
// retries what it lists (Capturer's sweep), at start and every
// Options.PurgeSweep. sqlite.Store and postgres.Store implement it.
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

// recordPending records in the ledger, before it is attempted, that the
// purge of k as of at is not done, so that a process stopping before it
// goes through leaves it to the next one. A ledger that fails is logged:
// the purge is then retried by this process alone.
func (c *Capturer) recordPending(k purgeKey, at time.Time) {
	if c.opts.Ledger == nil {
		return
	}
	// Not c.ctx: a purge the closing Capturer gives up is recorded too.
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.OpTimeout)
	defer cancel()
	if err := c.opts.Ledger.AddPendingPurge(ctx, pendingOf(k, at)); err != nil {
		c.logger.Warn("queue purge not recorded in the store; only this process retries it", "tenant", k.tenant, "err", err)
	}
}

// recordDone records in the ledger that the purge of k as of at went
// through. A ledger that fails leaves it listed: a later sweep purges
// again, which finds nothing more.
func (c *Capturer) recordDone(k purgeKey, at time.Time) {
	if c.opts.Ledger == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	defer cancel()
	if err := c.opts.Ledger.DonePurges(ctx, []memory.PendingPurge{pendingOf(k, at)}); err != nil {
		c.logger.Warn("queue purge done, but not recorded so in the store; a later sweep purges again", "tenant", k.tenant, "err", err)
	}
}

// sweepPurges retries the purges the ledger lists, at start and every
// Options.PurgeSweep, until c.ctx ends: those another process left
// pending when it stopped, or gave up, and this process's own. While this
// process retries purges of its own (retryPurges: the queues failing), it
// does not sweep: its retries tell when the queues answer again.
func (c *Capturer) sweepPurges() {
	t := time.NewTicker(c.opts.PurgeSweep)
	defer t.Stop()
	for {
		if c.purges.pending() == 0 {
			c.sweep()
		}
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep reads up to sweepBatch pending purges from the ledger and covers
// them with one purge of each queue, matching the queued entries' ids by
// their tombstone digests (the ledger holds no id); once it went through,
// it records them done (the Scrubber told, as after every purge).
func (c *Capturer) sweep() {
	ctx, cancel := context.WithTimeout(c.ctx, purgeTimeout)
	defer cancel()
	ps, err := c.opts.Ledger.PendingPurges(ctx, sweepBatch)
	if err != nil {
		c.logger.Warn("cannot read the pending queue purges from the store; trying again later", "err", err)
		return
	}
	if len(ps) == 0 {
		return
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
	if err != nil {
		c.purges.failed.Inc()
		c.logger.Warn("pending queue purges from the store failed; trying again later", "purges", len(ps), "err", err)
		return
	}
	if err := c.opts.Ledger.DonePurges(ctx, ps); err != nil {
		c.logger.Warn("pending queue purges done, but not recorded so in the store; a later sweep purges again", "err", err)
		return
	}
	c.logger.Info("pending queue purges from the store done", "purges", len(ps), "turns", n.Turns, "enrichments", n.Enrichments)
}
