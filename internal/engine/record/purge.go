package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
// still counts turns of theirs. It returns how many entries it removed;
// on an error, those it could not reach are dropped when processed, as
// before. A zero erasedAt (never erased) purges nothing.
//
// The engine calls it once the store has recorded the erasure (erasedAt
// is the store's ErasedAt), so that every entry queued before the call
// is covered. An entry can still reach a queue after it: a turn whose
// save failed while the erasure ran, or a stored exchange handed to
// enrichment just before the erasure committed. The store refuses what
// it would write, and the entry leaves the queue when it is processed.
func (c *Capturer) PurgeErased(ctx context.Context, tenant, user string, erasedAt time.Time) (int, error) {
	if erasedAt.IsZero() {
		return 0, nil
	}
	var (
		n    int
		errs []error
	)
	for _, q := range []struct {
		name  string
		queue Queue
		match func([]byte) bool
	}{
		{"capture", c.queue, erasedBy(tenant, user, erasedAt, false)},
		{"enrichment", c.enrich, erasedBy(tenant, user, erasedAt, true)},
	} {
		if q.queue == nil {
			continue
		}
		got, err := q.queue.Purge(ctx, q.match)
		n += got
		if err != nil {
			errs = append(errs, fmt.Errorf("purge the %s queue: %w", q.name, err))
		}
		if got > 0 {
			c.logger.Info("purged an erased user's queued exchanges", "queue", q.name, "tenant", tenant, "entries", got)
		}
	}
	if c.shared != nil {
		// The shared queue's counts now say whether the user's
		// conversations have turns queued (after the erasure): ask it.
		c.convMu.Lock()
		for id, st := range c.convs {
			if id.Tenant == tenant && id.User == user {
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

// queuedOwner is what erasedBy reads of a capture queue entry (an encoded
// memory.Exchange: its Identity's fields and At); queuedEnrichment, of an
// enrichment queue entry (an Enrichment).
type (
	queuedOwner struct {
		Tenant, User string
		At           time.Time `json:"at"`
	}
	queuedEnrichment struct {
		Exchange queuedOwner `json:"exchange"`
	}
)

// erasedBy returns the match of Queue.Purge for the entries an erasure of
// (tenant, user) at erasedAt voids: capture entries, or with enrichment
// enrichment entries, of the user's exchanges dated at or before it. An
// entry that does not decode is not the user's (the worker discards it).
func erasedBy(tenant, user string, erasedAt time.Time, enrichment bool) func(payload []byte) bool {
	// A payload that is the user's holds the user id as encoding/json
	// writes it; when that is the id itself, an entry without it is
	// passed over without decoding.
	var hint []byte
	if q, err := json.Marshal(user); err == nil && string(q) == `"`+user+`"` {
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
		return o.Tenant == tenant && o.User == user && !o.At.After(erasedAt)
	}
}
