package enrich

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/seen"
	"github.com/memgate/memgate/internal/telemetry"
)

// sideLane holds the claimed entries the index lane is done with until
// the side lane's rounds run the side hooks over them
// (EnrichOptions.Side). Both lanes work on the same durable entries: an
// entry is acknowledged only by the side lane's round, once the side
// hooks are done with it (or gave it up), so a stop or a crash loses
// nothing: what was claimed and not acknowledged is redelivered. The
// lane holds at most max entries waiting; what finds it full is shed:
// left claimed and unacknowledged, redelivered after StaleAfter. The
// zero of *sideLane (nil) is no lane: it holds nothing.
type sideLane struct {
	max int
	// indexed remembers the entries the index lane was done with and
	// the side lane let go unacknowledged (shed, released, fenced,
	// stopped), so
	// that their redelivery goes to the side lane without being indexed
	// again by this process.
	indexed seen.Set
	// wake is signalled when entries start waiting.
	wake chan struct{}

	mu sync.Mutex
	// waiting are the entries indexed and waiting for a side round,
	// oldest first.
	waiting []claimed
	// held are the ids of the entries waiting, kept by the side lane's
	// rounds (admit) or in one: a redelivery of one is ignored.
	held map[string]bool
}

// newSideLane returns a side lane holding at most max entries waiting,
// remembering up to remember entries indexed and let go.
func newSideLane(max, remember int) *sideLane {
	return &sideLane{max: max, indexed: seen.Set{Max: remember}, wake: make(chan struct{}, 1), held: map[string]bool{}}
}

// holds reports whether the entry id is held by the side lane.
func (s *sideLane) holds(id string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[id]
}

// pending is how many entries the lane holds: waiting, kept or in a round.
func (s *sideLane) pending() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// offer queues cs, the index lane's work done, for the side lane, as far
// as it has room, and returns the entries it shed: left unacknowledged,
// and remembered as indexed.
func (s *sideLane) offer(cs []claimed) (shed []claimed) {
	s.mu.Lock()
	room := max(s.max-len(s.waiting), 0)
	take := cs[:min(room, len(cs))]
	for _, c := range take {
		s.held[c.d.ID] = true
	}
	s.waiting = append(s.waiting, take...)
	shed = cs[len(take):]
	s.mu.Unlock()
	for _, c := range shed {
		s.indexed.Add(c.d.ID)
	}
	if len(take) > 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return shed
}

// take returns up to n entries waiting, oldest first, waiting for one at
// most wait (a negative wait: until ctx ends).
func (s *sideLane) take(ctx context.Context, n int, wait time.Duration) []claimed {
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		s.mu.Lock()
		k := min(n, len(s.waiting))
		out := slices.Clone(s.waiting[:k])
		s.waiting = slices.Delete(s.waiting, 0, k)
		s.mu.Unlock()
		if k > 0 || n <= 0 {
			return out
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timeout:
			return nil
		case <-s.wake:
		}
	}
}

// letGo forgets cs, entries held and left unacknowledged (or
// acknowledged: they are not redelivered), remembering them as indexed.
func (s *sideLane) letGo(cs []claimed) {
	if s == nil {
		return
	}
	s.mu.Lock()
	for _, c := range cs {
		delete(s.held, c.d.ID)
	}
	s.mu.Unlock()
	for _, c := range cs {
		s.indexed.Add(c.d.ID)
	}
}

// letGoWaiting forgets the entries waiting, left unacknowledged: for the
// enricher that took the queue's lease over, which reclaims them.
func (s *sideLane) letGoWaiting() {
	if s == nil {
		return
	}
	s.mu.Lock()
	out := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	s.letGo(out)
}

// indexRound is the index lane's round (with EnrichOptions.Side): it runs
// the index hooks (NewEnricher's) over a claimed batch, once per entry,
// and hands the entries to the side lane, which acknowledges them. An
// entry the side lane holds (reclaimed from this enricher after
// StaleAfter while it waits) is left to it; one this process indexed and
// the side lane let go is handed over without being indexed again. It
// acknowledges only the undecodable entries. It returns how long it
// waited between a failed hook's attempts.
func (e *Enricher) indexRound(ctx context.Context, ds []memory.Delivery) (waited time.Duration) {
	defer e.keepLease(ctx)()
	var acks []string
	var fresh, again []claimed
	now := e.clock()
	for _, d := range ds {
		if e.side.holds(d.ID) {
			continue
		}
		en, err := record.DecodeEnrichment(d.Payload)
		if err != nil {
			acks = append(acks, d.ID)
			e.poison.Inc()
			e.logger.Error("enricher discards an undecodable entry", "entry", d.ID, "bytes", len(d.Payload), "err", err)
			continue
		}
		d.Payload = nil // decoded: the side lane holds the exchange only
		c := claimed{d: d, en: en, since: now, key: conversationKey(en.Exchange.Identity), epoch: e.claimEpoch, read: e.claimRead}
		if e.side.indexed.Has(d.ID) {
			again = append(again, c)
		} else {
			fresh = append(fresh, c)
		}
	}
	e.ack(ctx, acks)
	if len(fresh) > 0 {
		byConversation(fresh)
		exs := make([]memory.Exchange, len(fresh))
		for i, c := range fresh {
			exs[i] = c.en.Exchange
		}
		// As a round's: the work survives a cancelled ctx for the hooks'
		// grace (see roundOf).
		hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		defer context.AfterFunc(ctx, func() { time.AfterFunc(e.opts.HookTimeout, cancel) })()
		hctx, span := telemetry.StartLinked(hctx, e.opts.Tracer, "memory.index", traceParents(exs), attribute.Int("memgate.exchanges", len(exs)))
		ok, w := e.runHooks(ctx, hctx, e.hooks, fresh)
		span.End()
		waited = w
		if !ok {
			// Stopping with a hook to retry: every entry is left for
			// redelivery, indexed again by the next run.
			return waited
		}
		e.observe(e.indexLag, fresh)
	}
	if shed := e.side.offer(append(again, fresh...)); len(shed) > 0 {
		e.shed.Add(float64(len(shed)))
		e.logger.Warn("enricher's side lane is full; indexed exchanges are left for redelivery to it",
			"exchanges", len(shed), "side_pending", e.side.pending())
	}
	return waited
}

// runSide runs the side lane until ctx ends: rounds (roundOf) of the side
// hooks over what the index lane handed over, paced as Run's rounds are,
// each acknowledging what it is done with; what it held past half of
// StaleAfter it lets go first, unacknowledged (releaseStale). What waits
// for it when ctx ends is left unacknowledged, redelivered to the next
// run.
func (e *Enricher) runSide(ctx context.Context) {
	var next time.Time
	for ctx.Err() == nil {
		if wait := time.Until(next); wait > 0 && !pace.Sleep(ctx, wait) {
			return
		}
		kept := e.takeDeferred()
		wait := time.Duration(-1)
		if len(kept) > 0 {
			wait = e.opts.Interval // kept entries wait for the next round only
		}
		batch := append(kept, e.side.take(ctx, e.opts.Batch-len(kept), wait)...)
		if ctx.Err() != nil {
			e.side.letGo(batch)
			return
		}
		if len(batch) == 0 {
			continue
		}
		if batch = e.dropErased(ctx, batch); len(batch) == 0 {
			continue
		}
		if batch = e.releaseStale(batch); len(batch) == 0 {
			continue
		}
		start := time.Now()
		waited := e.roundOf(ctx, nil, batch, e.opts.Side)
		// What the round kept (admit) stays held; the rest is done with:
		// acknowledged, or left for redelivery (fenced, stopping, or of
		// a conversation another enricher holds).
		e.side.letGo(notIn(batch, e.deferred))
		next = start.Add(max(e.opts.Interval, time.Duration(float64(time.Since(start)-waited)/e.opts.Share)))
	}
}

// releaseStale returns batch without the entries held for half of
// StaleAfter or more (since claimed.since, when this enricher claimed
// them), which it lets go unacknowledged, counted
// (memgate_enrich_side_released_total), before any side work starts on
// them: the side lane never starts paid side-model work for an entry
// this process may no longer own.
//
// An entry waits in the side lane (a full lane behind a slow side model)
// while its claim ages in the queue. Past StaleAfter, another process
// sharing the queue (gateways and workers on one Redis stream; on SQLite,
// the process that takes the outbox's lease over) reclaims it, indexes it
// and runs its side hooks; if this process then ran them too, the side
// model would be paid twice for it. Half of StaleAfter leaves the round
// that starts now the other half, less its lease round trip, before
// anyone can reclaim: from there its conversations' leases
// (EnrichOptions.Conversations) keep another process's side lane off
// them while the round runs (on SQLite, the outbox's lease keeps every
// other process from claiming). A released entry is not lost: left claimed
// and unacknowledged, it is redelivered once stale — to this process,
// which hands it to the side lane again without indexing it again
// (sideLane.indexed), or to another, which enriches it once.
//
// Released rather than kept: renewing the claims of the entries waiting
// (XCLAIM to self, a newer claimed_at) would let a process whose side
// lane hangs hold them for as long as it lives; asking the queue before
// each round whether this consumer still holds each entry would cost a
// round trip per round and a method of every queue. The age is known
// here for nothing and bounds the same thing: no process reclaims an
// entry within StaleAfter of its claim. An entry that waits that long
// finds the lane backed up, so its side work would wait anyway: a
// release costs it StaleAfter more of waiting and its redelivery (and,
// when another process reclaims it, an indexing there), never a second
// side-model call.
func (e *Enricher) releaseStale(batch []claimed) []claimed {
	limit := e.opts.StaleAfter / 2
	now := e.clock()
	var keep, stale []claimed
	for _, c := range batch {
		if now.Sub(c.since) >= limit {
			stale = append(stale, c)
			continue
		}
		keep = append(keep, c)
	}
	if len(stale) > 0 {
		e.side.letGo(stale)
		e.released.Add(float64(len(stale)))
		e.logger.Warn("enricher's side lane releases exchanges that waited past half of the reclaim time; they are left for redelivery",
			"exchanges", len(stale), "stale_after", e.opts.StaleAfter)
	}
	return keep
}

// dropErased returns batch without the entries of users erased at or
// after their exchange was said (or undated: see
// record.Capturer.PurgeErased), which it acknowledges and lets go
// (EnrichOptions.Erased). A user whose erasure cannot be read keeps their
// entries: the stores' erasure guard still refuses what the hooks write.
func (e *Enricher) dropErased(ctx context.Context, batch []claimed) []claimed {
	if e.opts.Erased == nil || len(batch) == 0 {
		return batch
	}
	voided := e.erasedSince(ctx)
	var keep, gone []claimed
	var acks []string
	for _, c := range batch {
		if voided(c.en.Exchange) {
			gone, acks = append(gone, c), append(acks, c.d.ID)
			continue
		}
		keep = append(keep, c)
	}
	e.ack(ctx, acks)
	e.side.letGo(gone)
	return keep
}

// markErased marks Dropped, for the hooks, the entries of all whose user
// was erased at or after their exchange was said (EnrichOptions.Erased),
// as a save after the erasure would have: the hooks skip them, and the
// erasure guard of what they write for the user's other exchanges
// (record.RunHooks: the earliest of the user's exchanges in the round)
// comes from the exchanges said since, so the turns of a user who chats
// again after their erasure are enriched in a round that also holds one
// from before it (another gateway's in-memory queue, deferred turns: what
// the erasure's purge does not reach).
func (e *Enricher) markErased(ctx context.Context, all []claimed) {
	if e.opts.Erased == nil || len(all) == 0 {
		return
	}
	voided := e.erasedSince(ctx)
	for i := range all {
		if voided(all[i].en.Exchange) {
			all[i].en.Result.Dropped = true
		}
	}
}

// erasedSince returns whether an exchange's user was erased at or after
// it was said (or it is undated), reading each user's erasure once
// (EnrichOptions.Erased); a user whose erasure cannot be read is not.
func (e *Enricher) erasedSince(ctx context.Context) func(memory.Exchange) bool {
	type user struct{ tenant, user string }
	erased := map[user]time.Time{}
	return func(ex memory.Exchange) bool {
		u := user{ex.Tenant, ex.User}
		at, ok := erased[u]
		if !ok {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			if at, err = e.opts.Erased(rctx, u.tenant, u.user); err != nil {
				e.failures.WithLabelValues("erased").Inc()
				e.logger.Warn("enricher cannot read a user's erasure", "err", err)
			}
			cancel()
			erased[u] = at
		}
		return !at.IsZero() && (ex.At.IsZero() || !ex.At.After(at))
	}
}

// notIn returns the entries of all that none of outs holds.
func notIn(all []claimed, outs ...[]claimed) []claimed {
	ids := map[string]bool{}
	for _, out := range outs {
		for _, c := range out {
			ids[c.d.ID] = true
		}
	}
	var rest []claimed
	for _, c := range all {
		if !ids[c.d.ID] {
			rest = append(rest, c)
		}
	}
	return rest
}
