package record

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// PurgeErased removes from the capture queue and the enrichment queue the
// entries that an erasure of (tenant, user) at erasedAt voids: the user's
// exchanges dated at or before it, which the store refuses to store or
// enrich once they are processed (memory.ErrErased; a save reports them
// Dropped), and undated ones (queued by a version that did not date
// them: captured before the erasure, though a store would date them when
// it stored them). A turn the user sent after the erasure stays queued. An entry a worker
// has claimed is purged too; a worker storing it has its save refused
// all the same, and its acknowledgement is a no-op. The queues keep their
// counts of queued turns exact (Queue.Purge), and this Capturer stops
// holding the user's conversations behind the turns it had queued for
// them: their next turns are stored directly unless the shared queue
// still counts turns of theirs. Then, once the purge went through both
// queues, it tells Options.Scrubber, whatever it removed (not after an
// attempt that failed). A zero erasedAt (never erased) purges nothing.
//
// It returns how many entries it removed from each queue (Purged) once
// the purge is done, waiting as long as the queues answer; a purge the
// queues leave unanswered for Options.PurgeWait (Redis unreachable), or
// fail, it leaves running, and answers Pending. A pending purge is tried
// again in the background until the queues take it (see retryPurges);
// until then its entries are refused when they are processed, as before.
// ctx ending ends only the wait (Pending): the purge goes on.
//
// The engine calls it once the store has recorded the erasure (erasedAt
// is the store's ErasedAt), and with it the purge it owes (PurgeLedger),
// so that every entry queued before the call is covered. An entry can still reach a queue after it: a turn whose
// save failed while the erasure ran, or a stored exchange handed to
// enrichment just before the erasure committed. The store refuses what
// it would write, and the entry leaves the queue when it is processed.
func (c *Capturer) PurgeErased(ctx context.Context, tenant, user string, erasedAt time.Time) Purged {
	if erasedAt.IsZero() {
		return Purged{}
	}
	return c.purgeSoon(ctx, purgeKey{tenant: tenant, user: user}, erasedAt)
}

// PurgeDeleted is PurgeErased for the deletion of conversation id at
// deletedAt (the store's DeletedAt): it removes the conversation's
// exchanges received at or before it (memory.Exchange.Received, else
// their At), which the store drops when they are processed, and stops
// holding the conversation behind the turns it had queued for it. A zero
// deletedAt purges nothing.
func (c *Capturer) PurgeDeleted(ctx context.Context, id memory.Identity, deletedAt time.Time) Purged {
	if deletedAt.IsZero() {
		return Purged{}
	}
	return c.purgeSoon(ctx, purgeKey{tenant: id.Tenant, user: id.User, conversation: id.Conversation}, deletedAt)
}

// Purged counts the entries a purge removed: Turns from the capture
// queue (exchanges answered and not yet stored), Enrichments from the
// enrichment queue (exchanges stored and waiting to be enriched).
// Pending says the purge was not done when the call returned (the counts
// are then of what it had removed by then).
type Purged struct {
	Turns, Enrichments int
	Pending            bool
}

// purgeKey names what a purge voids: the erasure of (tenant, user), or,
// with a conversation, that conversation's deletion.
type purgeKey struct{ tenant, user, conversation string }

// run purges the queues of what k voids as of at (see PurgeErased),
// calling beat each time a queue shows it is answering.
func (c *Capturer) run(ctx context.Context, k purgeKey, at time.Time, beat func()) (Purged, error) {
	if k.conversation == "" {
		voided := func(o queuedOwner) bool { return o.Tenant == k.tenant && o.User == k.user && !o.At.After(at) }
		return c.purge(ctx, k.tenant, k.user, voided, func(id memory.Identity) bool { return id.Tenant == k.tenant && id.User == k.user }, beat)
	}
	id := memory.Identity{Tenant: k.tenant, User: k.user, Conversation: k.conversation}
	voided := func(o queuedOwner) bool {
		return o.Tenant == id.Tenant && o.User == id.User && o.Conversation == id.Conversation &&
			!cmp.Or(o.Received, o.At).After(at)
	}
	return c.purge(ctx, k.tenant, k.user, voided, func(conv memory.Identity) bool { return conv == id }, beat)
}

// QueuedSince returns when the oldest entry of the capture queue was
// enqueued (the zero time: none, or no queue): a tombstone of a
// conversation never stored lives by it (memory.TombstoneHorizon).
func (c *Capturer) QueuedSince(ctx context.Context) (time.Time, error) {
	if c.queue == nil {
		return time.Time{}, nil
	}
	at, err := c.queue.Oldest(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("oldest queued capture: %w", err)
	}
	return at, nil
}

// purge removes from both queues the entries of (tenant, user)'s exchanges that
// voided says are void, and forgets that the conversations conv selects
// have turns queued (see PurgeErased). It calls beat as each entry is
// read and each queue is done: the queues are answering.
func (c *Capturer) purge(ctx context.Context, tenant, user string, voided func(queuedOwner) bool, conv func(memory.Identity) bool, beat func()) (Purged, error) {
	var (
		n    Purged
		errs []error
	)
	for _, q := range []struct {
		name  string
		queue Queue
		match func([]byte) bool
		n     *int
	}{
		{"capture", c.queue, voidedBy(user, voided, false), &n.Turns},
		{"enrichment", c.enrich, voidedBy(user, voided, true), &n.Enrichments},
	} {
		if q.queue == nil {
			continue
		}
		match := q.match
		got, err := q.queue.Purge(ctx, func(payload []byte) bool { beat(); return match(payload) })
		beat()
		*q.n += got
		if err != nil {
			errs = append(errs, fmt.Errorf("purge the %s queue: %w", q.name, err))
		}
		if got > 0 {
			c.logger.Info("purged erased or deleted exchanges from a queue", "queue", q.name, "tenant", tenant, "entries", got)
		}
	}
	if c.opts.Scrubber != nil && len(errs) == 0 {
		// Whatever the purge removed: the queues' copies elsewhere (Redis's
		// append-only file) hold the user's processed exchanges too. Once,
		// when the purge went through: an attempt that failed is tried
		// again, and the scrub follows the one that does.
		c.opts.Scrubber.Scrub()
	}
	if c.shared != nil {
		// The shared queue's counts now say whether the conversations
		// have turns queued (after the erasure or deletion): ask it.
		c.convMu.Lock()
		for id, st := range c.convs {
			if conv(id) {
				st.queued = false
				if st.inflight == 0 {
					delete(c.convs, id)
				}
			}
		}
		c.convMu.Unlock()
	}
	return n, errors.Join(errs...)
}

// queuedOwner is what voidedBy reads of a capture queue entry (an encoded
// memory.Exchange: its Identity's fields, At and Received); queuedEnrichment,
// of an enrichment queue entry (an Enrichment).
type (
	queuedOwner struct {
		Tenant, User, Conversation string
		At                         time.Time `json:"at"`
		Received                   time.Time `json:"received"`
	}
	queuedEnrichment struct {
		Exchange queuedOwner `json:"exchange"`
	}
)

// voidedBy returns the match of Queue.Purge for the entries of user's
// exchanges that voided says are void: capture entries, or with enrichment
// enrichment entries. An entry that does not decode is not the user's (the
// worker discards it).
func voidedBy(user string, voided func(queuedOwner) bool, enrichment bool) func(payload []byte) bool {
	// A payload that is the user's holds the user id as encoding/json
	// writes it; when that is the id itself, an entry without it is
	// passed over without decoding.
	var hint []byte
	if q, err := json.Marshal(user); err == nil && user != "" && string(q) == `"`+user+`"` {
		hint = q
	}
	return func(payload []byte) bool {
		if hint != nil && !bytes.Contains(payload, hint) {
			return false
		}
		var o queuedOwner
		if enrichment {
			var en queuedEnrichment
			if json.Unmarshal(payload, &en) != nil {
				return false
			}
			o = en.Exchange
		} else if json.Unmarshal(payload, &o) != nil {
			return false
		}
		return voided(o)
	}
}
