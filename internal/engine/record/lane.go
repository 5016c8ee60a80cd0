package record

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
)

// runLane stores the exchanges handed to one lane, in arrival order: each
// round takes what has queued up (up to Options.Batch) and stores it in one
// transaction when it can.
func (c *Capturer) runLane(ch chan *job) {
	batch := make([]*job, 0, c.opts.Batch)
	for j := range ch {
		batch = append(batch[:0], j)
	fill:
		for len(batch) < c.opts.Batch {
			select {
			case next, ok := <-ch:
				if !ok {
					break fill
				}
				batch = append(batch, next)
			default:
				break fill
			}
		}
		c.store(batch)
	}
}

// store stores a lane's batch, then queues the stored exchanges for
// enrichment. The batch goes in one transaction when the saver can, its
// chats' locks are held and no conversation of it has turns waiting in
// the capture queue, and none of it is late (it goes to the capture
// queue, see late) — even a batch of one: the group commit is the
// saver's cheapest path (two round trips on PostgreSQL, where one by one
// takes several per exchange). Otherwise, or when that transaction fails,
// the exchanges are stored one by one, so one bad exchange never holds up
// the others, and a chat turn whose locks cannot be taken goes to the
// capture queue (storeOne).
func (c *Capturer) store(batch []*job) {
	if c.ctx.Err() != nil {
		for _, j := range batch {
			c.giveUp(j)
		}
		return
	}
	// A chat turn whose conversation has turns in the capture queue
	// follows them there (storeOne), its chat's lock not needed. Known
	// here (this Capturer queued them), those chats are not locked. The
	// others are asked about once their locks are held, so that turns
	// another store queued before it let go of them are seen. When one of
	// those locks is held by another store, the shared queue is asked
	// before they are waited for too: a chat whose turns it queued is not
	// locked, so its turn never waits for a lock another store holds.
	queued := c.knownQueued(batch)
	hold := c.tryLockChats(unqueued(batch, queued))
	if !hold.held {
		for id := range c.queuedConvs(unqueued(batch, queued)) {
			queued = with(queued, id)
		}
		hold = c.lockChats(unqueued(batch, queued))
	}
	// From the adoptions to the saves (which record the candidates), no
	// first turn of a chat of the batch is stored elsewhere, nor a
	// continuation of one.
	defer hold.unlock()
	batch, ready := c.adoptions(batch, hold, queued)
	if len(batch) == 0 {
		return
	}
	// Asked under the locks, for the rest: another gateway may have
	// queued a chat's turns before they were taken.
	for id := range c.queuedConvs(unqueued(batch, queued)) {
		queued = with(queued, id)
	}
	if c.batch != nil && ready && len(queued) == 0 && !slices.ContainsFunc(batch, c.late) {
		exs := make([]memory.Exchange, len(batch))
		for i, j := range batch {
			exs[i] = hold.fenced(j.ex)
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
		results, err := c.batch.SaveExchanges(ctx, exs)
		cancel()
		c.noteHung(err)
		if err == nil {
			c.metrics.groupSize.Observe(float64(len(batch)))
			var (
				stored []*job
				res    []memory.SaveResult
				parted []*job
			)
			for i, j := range batch {
				if results[i].Parted {
					parted = append(parted, j)
					continue
				}
				c.saved(j, results[i])
				stored, res = append(stored, j), append(res, results[i])
			}
			// An exchange its conversation refused goes, after the rest
			// of the batch, to the conversation its history continues.
			for _, j := range parted {
				if r, ok := c.storeParted(j, hold); ok {
					stored, res = append(stored, j), append(res, r)
				}
			}
			c.enqueueEnrichment(stored, res)
			return
		}
		if errors.Is(err, memory.ErrLockLost) {
			// Taken again, and checked again, before the saves one by one.
			hold.unlock()
		}
		c.metrics.failures.WithLabelValues("group").Inc()
		c.logger.Warn("capture group commit failed; storing one by one", "exchanges", len(batch), "err", err)
	}
	var (
		stored  []*job
		results []memory.SaveResult
	)
	for _, j := range batch {
		h := c.narrowed(hold, j)
		res, ok := c.storeOne(j, queued[j.ex.Identity], h)
		if h != hold {
			h.unlock()
		}
		if ok {
			stored, results = append(stored, j), append(results, res)
		}
	}
	c.enqueueEnrichment(stored, results)
}

// narrowed returns the hold j is stored under: hold, or, when hold could
// not be taken and covers other chats than j's, a hold of j's chat alone
// that starts from hold's failure, so that j's retries wait for no other
// chat's locks (its caller releases it once j is done with).
func (c *Capturer) narrowed(hold *chatHold, j *job) *chatHold {
	if hold.held || hold.err == nil || len(hold.chats) < 2 {
		return hold
	}
	own := c.chats.hold(j.ex)
	own.err = hold.err
	return own
}

// storeOne stores one exchange and reports whether it was saved (stored or
// found stored before). An exchange whose conversation has turns in the
// capture queue (queued, or since) follows them there. A chat turn is
// saved only under its chat's locks (hold), adopted and checked under
// them (ready): when they cannot be taken, or its adoption or check
// fails, it is not saved but handled as a failed save. A failed save is
// retried at once; if it fails again, the exchange goes to the capture
// queue (and the conversation's later turns after it, in order), where
// the Worker stores it under the locks, or, without one (or when it fails
// too), is retried with backoff until it is stored, Close gives up, or
// Options.RetryFor has passed since its capture: then it becomes a dead
// letter (expired). Input the store refuses for good becomes a dead
// letter at once. A save refused because the lane stalled past the
// store's chat lock (memory.ErrLockLost) is tried again at once under the
// lock taken again, adopted and checked again; refused again, it is a
// failed save.
func (c *Capturer) storeOne(j *job, queued bool, hold *chatHold) (memory.SaveResult, bool) {
	delay := c.opts.RetryBase
	var last error       // the last save's failure
	queueFailed := false // the capture queue did not take j
	for retake := false; ; retake = true {
		if c.ctx.Err() != nil {
			c.giveUp(j)
			return memory.SaveResult{}, false
		}
		if !queued && !c.isQueued(j.ex.Identity) && (queueFailed || !c.late(j)) {
			ahead, err := c.ready(j, hold, retake)
			if err == nil && ahead {
				c.saved(j, memory.SaveResult{Duplicate: true})
				return memory.SaveResult{}, false
			}
			var res memory.SaveResult
			if err == nil {
				ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
				res, err = c.saver.SaveExchange(ctx, hold.fenced(j.ex))
				cancel()
				c.noteHung(err)
				if err == nil && res.Parted {
					if err = c.reroute(j); err == nil {
						queued = c.queuedConvs([]*job{j})[j.ex.Identity]
						continue
					}
				}
			}
			switch {
			case err == nil:
				c.saved(j, res)
				return res, !res.Dropped
			case errors.Is(err, errUnlocked):
				c.metrics.failures.WithLabelValues("chat_lock").Inc()
				c.logger.Warn("capture cannot take a chat's locks; its turn is not stored without them", "exchange", j.ex.ID, "err", err)
				last = err
			case errors.Is(err, memory.ErrLockLost):
				hold.unlock()
				c.metrics.failures.WithLabelValues("chat_lock_lost").Inc()
				c.logger.Warn("capture lost a chat's lock before its save; storing it again under the lock", "exchange", j.ex.ID)
				last = err
				// While the lock was lost another gateway may have queued
				// the chat's next turns: asked again, j follows them there
				// rather than being stored after them.
				queued = c.queuedConvs([]*job{j})[j.ex.Identity]
				if j.lockLost++; j.lockLost == 1 {
					continue
				}
			default:
				if c.refused(j, err) {
					return memory.SaveResult{}, false
				}
				last = err
				if j.attempts == 1 {
					continue // the first retry is immediate
				}
			}
		}
		if c.queue != nil {
			if c.toQueue(j) {
				return memory.SaveResult{}, false
			}
			queueFailed = true
		}
		if c.expired(j, last) {
			return memory.SaveResult{}, false
		}
		if !c.backoff(j, &delay) {
			c.giveUp(j)
			return memory.SaveResult{}, false
		}
	}
}

// late reports whether j goes to the capture queue without a save (again)
// in the store: the store hangs (a save ran out of OpTimeout less than
// OpTimeout ago), so the retry, or a lane's next turns, would hang too,
// and Capture, which waits SaveWait before the reply goes to the client,
// would give up on a turn neither stored nor queued, which a crash then
// loses. Only with a capture queue, and when Capture waits longer than a
// save may take (SaveWait > OpTimeout): otherwise it never waited for the
// store. A turn that waited in its lane for something else (a hung
// enrichment queue: Redis, the capture queue's home too) is saved as usual.
func (c *Capturer) late(*job) bool {
	if c.queue == nil || c.opts.SaveWait <= c.opts.OpTimeout {
		return false
	}
	hung := c.hungAt.Load()
	return hung != 0 && time.Since(time.Unix(0, hung)) < c.opts.OpTimeout
}

// noteHung records a save that ran out of OpTimeout (see late).
func (c *Capturer) noteHung(err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		c.hungAt.Store(time.Now().UnixNano())
	}
}

// ready readies j's save under hold (lockAndCheck): its chat's locks taken,
// waiting at most OpTimeout, its chat's first turns adopted and j checked
// for a continuation stored ahead (ahead). Unless retake, a hold whose
// last take failed (the batch's, just now) is not taken again: j is not
// saved (errUnlocked), and its turn goes on to the capture queue at once.
func (c *Capturer) ready(j *job, hold *chatHold, retake bool) (ahead bool, err error) {
	if _, ok := memory.ChatOf(j.ex); ok && !retake && !hold.held && hold.err != nil {
		return false, fmt.Errorf("%w: %w", errUnlocked, hold.err)
	}
	return lockAndCheck(c.ctx, hold, c.opts.OpTimeout, c.opts.OpTimeout, c.adopter, j.ex, &j.checked, c.logger)
}

// storeParted stores j, which its conversation refused in a group commit
// (memory.SaveResult.Parted), in the conversation its history continues
// (reroute; when that fails, the save refuses it again and storeOne
// retries), as storeOne stores.
func (c *Capturer) storeParted(j *job, hold *chatHold) (memory.SaveResult, bool) {
	if err := c.reroute(j); err != nil {
		c.logger.Warn("capture cannot place a refused exchange yet; retrying", "exchange", j.ex.ID, "err", err)
	}
	return c.storeOne(j, c.queuedConvs([]*job{j})[j.ex.Identity], hold)
}

// maxReroutes bounds how often one exchange is refused and placed again:
// each time another save changed the conversations it reads in between.
const maxReroutes = maxBranchHops + 2

// reroute moves j, which its conversation refused (memory.SaveResult.Parted:
// its history parts from what the conversation holds now), to the
// conversation its history continues now (Options.Router); its chat's
// first turns are adopted there before its save (ready), as before any
// save. Without a router, or once j was placed maxReroutes times, j stays
// where it is, without the guard (its BranchSeed cleared): stored there
// as an edit, logged. An error is a failed read; j is then unchanged.
func (c *Capturer) reroute(j *job) error {
	if c.router == nil || j.reroutes >= maxReroutes {
		c.logger.Warn("capture stores an exchange its conversation parts from as an edit",
			"exchange", j.ex.ID, "conversation", j.ex.Conversation, "reroutes", j.reroutes)
		j.ex.BranchSeed, j.payload = "", nil
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	defer cancel()
	ex, err := c.router.Reroute(ctx, j.ex)
	if err != nil {
		c.metrics.failures.WithLabelValues("reroute").Inc()
		return err
	}
	j.reroutes++
	c.metrics.rerouted.Inc()
	c.logger.Debug("capture moved an exchange to the branch its history continues", "exchange", ex.ID,
		"from", j.ex.Conversation, "to", ex.Conversation)
	j.ex, j.payload = ex, nil
	j.checked = 0 // adopted and checked again where it goes, before its save
	return nil
}

// refused counts a failed save of j and reports whether j is done with: set
// aside as a dead letter because the store refuses it for good (invalid
// input), or because it kept failing with an error that is not the store
// being away.
func (c *Capturer) refused(j *job, err error) bool {
	j.attempts++
	c.metrics.failures.WithLabelValues("save").Inc()
	if errors.Is(err, memory.ErrInvalid) || !transient(err) && j.attempts >= c.opts.MaxAttempts {
		c.deadLetter(j, err)
		return true
	}
	if j.attempts == 1 || j.attempts%10 == 0 {
		c.logger.Warn("capture cannot store an exchange; retrying", "exchange", j.ex.ID, "attempt", j.attempts, "err", err)
	}
	return false
}

// transient reports whether a save failed for a while only: the store
// away, a deadline, or a chat lock lost that the saver could not take
// again (memory.ErrLockLost).
func transient(err error) bool {
	return errors.Is(err, memory.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, memory.ErrLockLost)
}

// errNotDurable is the cause of an expired exchange that was not tried
// in the store (its conversation's turns were queued) and that the
// capture queue did not take.
var errNotDurable = errors.New("the capture queue did not take it")

// expired reports whether j has waited Options.RetryFor since its capture
// without being stored or queued, and then sets it aside as a dead letter
// (see deadLetter: counted, logged, dropped when the dead letter cannot be
// written either), last its last failure, so that it holds its lane and
// its chat's locks no longer. A turn whose last failure is its chat's
// lock held by another store (lockHeld) is not set aside then — a dead
// letter is never stored later, and the turn was answered — but keeps
// waiting for the lock, which its holder gives up once stored (or, frozen,
// once its lease ran out), reported once (failures{stage="chat_lock_held"},
// logged at error), for up to Options.LockWaitFor.
func (c *Capturer) expired(j *job, last error) bool {
	age := time.Since(j.start)
	if age < c.opts.RetryFor {
		return false
	}
	if lockHeld(last) && age < c.opts.LockWaitFor {
		if !j.lockHeld {
			j.lockHeld = true
			c.metrics.failures.WithLabelValues("chat_lock_held").Inc()
			c.logger.Error("capture still waits for a chat's lock, held by another store; the turn is kept and stored once it frees",
				"exchange", j.ex.ID, "request_id", j.ex.RequestID, "tenant", j.ex.Tenant, "waited", age.Round(time.Second), "err", last)
		}
		return false
	}
	c.metrics.failures.WithLabelValues("expired").Inc()
	c.deadLetter(j, fmt.Errorf("not stored within %s of its capture: %w", c.opts.RetryFor, cmp.Or(last, errNotDurable)))
	return true
}

// lockHeld reports whether err is a chat turn left unsaved because its
// chat's locks could not be taken within the wait (errUnlocked and a
// deadline: another store holding them, or a store too slow to grant
// them, which would take no dead letter either), not because the lock
// store failed outright.
func lockHeld(err error) bool {
	return errors.Is(err, errUnlocked) && errors.Is(err, context.DeadlineExceeded)
}

// backoff waits before j's next attempt, doubling delay up to RetryMax. It
// reports false when Close gave up meanwhile.
func (c *Capturer) backoff(j *job, delay *time.Duration) bool {
	c.retrying.Add(1)
	defer c.retrying.Add(-1)
	d := *delay
	*delay = min(2**delay, c.opts.RetryMax)
	return pace.Sleep(c.ctx, d)
}

// toQueue puts j in the capture queue, where the Worker stores it, and marks
// its conversation so that its later turns follow it there. It reports
// whether the queue took it.
func (c *Capturer) toQueue(j *job) bool {
	payload, err := j.encoded()
	if err != nil {
		// Not storable anywhere but the store, which is away: drop it.
		c.metrics.failures.WithLabelValues("encode").Inc()
		c.drop(context.Background(), j.ex, "cannot encode: "+err.Error())
		c.finish(j)
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	if c.shared != nil {
		err = c.shared.EnqueueTurn(ctx, ConvKey(j.ex.Identity), payload)
	} else {
		err = c.queue.Enqueue(ctx, payload)
	}
	cancel()
	if err != nil {
		c.metrics.failures.WithLabelValues("enqueue").Inc()
		c.logger.Warn("capture queue unavailable too; holding the exchange", "exchange", j.ex.ID, "err", err)
		return false
	}
	c.convMu.Lock()
	c.queuings++
	// The conversation's later turns follow it there, also when it was
	// placed in another conversation than it was captured for (reroute).
	st := c.convs[j.ex.Identity]
	if st == nil {
		st = &convState{}
		c.convs[j.ex.Identity] = st
	}
	st.queued = true
	c.convMu.Unlock()
	c.metrics.queued.Inc()
	j.outcome = Queued
	c.finish(j)
	return true
}

// isQueued reports whether turns of id wait, or may wait (a backlog the
// Capturer started with), in the capture queue.
func (c *Capturer) isQueued(id memory.Identity) bool {
	if c.backlog.Load() {
		return true
	}
	c.convMu.Lock()
	defer c.convMu.Unlock()
	st := c.convs[id]
	return st != nil && st.queued
}

// knownQueued returns the conversations of batch whose turns wait, or may
// wait, in the capture queue as far as this Capturer knows without
// asking the shared queue: queued by it, or any conversation during a
// backlog it started with.
func (c *Capturer) knownQueued(batch []*job) map[memory.Identity]bool {
	queued, _ := c.localQueued(batch)
	return queued
}

// localQueued returns the conversations of batch known here to have turns
// in the capture queue (knownQueued), and, with a SharedQueue, the others,
// each once, to ask it about.
func (c *Capturer) localQueued(batch []*job) (queued map[memory.Identity]bool, ask []memory.Identity) {
	backlog := c.backlog.Load()
	c.convMu.Lock()
	defer c.convMu.Unlock()
	for _, j := range batch {
		id := j.ex.Identity
		if st := c.convs[id]; backlog || st != nil && st.queued {
			queued = with(queued, id)
		} else if c.shared != nil && !slices.Contains(ask, id) {
			ask = append(ask, id)
		}
	}
	return queued, ask
}

// with returns set with id added, made when nil.
func with(set map[memory.Identity]bool, id memory.Identity) map[memory.Identity]bool {
	if set == nil {
		set = map[memory.Identity]bool{}
	}
	set[id] = true
	return set
}

// queuedConvs returns the conversations of batch whose turns wait, or may
// wait, in the capture queue: queued by this Capturer, any conversation
// during a backlog it started with, or, with a SharedQueue, queued by any
// gateway (asked in one round trip, for the conversations not known here).
// A check that fails counts as nothing queued: a chat's turn is stored
// rather than held while the queue is away (it cannot take new turns
// then either); the failure is counted and logged, and the next checks
// wait a second.
func (c *Capturer) queuedConvs(batch []*job) map[memory.Identity]bool {
	queued, ask := c.localQueued(batch)
	if len(ask) == 0 || time.Now().UnixNano() < c.askAfter.Load() {
		return queued
	}
	// Each conversation by its name and by the name older gateways gave it
	// (legacyConvKey).
	keys := make([]string, 2*len(ask))
	for i, id := range ask {
		keys[i], keys[len(ask)+i] = ConvKey(id), legacyConvKey(id)
	}
	ctx, cancel := context.WithTimeout(c.ctx, min(c.opts.OpTimeout, time.Second))
	got, err := c.shared.Queued(ctx, keys...)
	cancel()
	if err != nil {
		c.askAfter.Store(time.Now().Add(time.Second).UnixNano())
		c.metrics.failures.WithLabelValues("queued_check").Inc()
		c.logger.Warn("capture cannot tell whether conversations have turns in the shared capture queue; storing directly", "exchanges", len(batch), "err", err)
		return queued
	}
	for i, q := range got {
		if q && i < len(keys) {
			queued = with(queued, ask[i%len(ask)])
		}
	}
	return queued
}

// watchQueued lets conversations whose turns went to the capture queue,
// and every conversation after a backlog the Capturer started with, save
// directly again once the queue has drained (every entry stored and
// acknowledged), checking every 200ms until Close.
func (c *Capturer) watchQueued() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.convMu.Lock()
		any, seen := c.backlog.Load(), c.queuings
		for _, st := range c.convs {
			any = any || st.queued
		}
		c.convMu.Unlock()
		if !any {
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
		n, err := c.queue.Pending(ctx)
		cancel()
		if err != nil || n > 0 {
			continue
		}
		c.convMu.Lock()
		if c.queuings != seen {
			// A turn went to the queue after it was counted: count again.
			c.convMu.Unlock()
			continue
		}
		c.backlog.Store(false)
		for id, st := range c.convs {
			st.queued = false
			if st.inflight == 0 {
				delete(c.convs, id)
			}
		}
		c.convMu.Unlock()
	}
}

// saved records a stored exchange and releases its waiters.
func (c *Capturer) saved(j *job, res memory.SaveResult) {
	c.metrics.saved.Inc()
	j.outcome = Stored
	switch {
	case res.Duplicate:
		c.metrics.duplicates.Inc()
		j.outcome = Duplicate
	case res.Dropped:
		c.metrics.erased.Inc()
		j.outcome = Erased
	}
	c.metrics.saveSeconds.Observe(time.Since(j.start).Seconds())
	c.finish(j)
}

// finish marks j durable (or given up): its conversation no longer waits
// for it, nor does Capture.
func (c *Capturer) finish(j *job) {
	c.end(j.id)
	close(j.done)
}

// giveUp drops j at shutdown.
func (c *Capturer) giveUp(j *job) {
	c.drop(context.Background(), j.ex, "abandoned at shutdown")
	c.finish(j)
}

// deadLetter sets j aside as refused for good, counted and logged, so that
// it never blocks the turns behind it.
func (c *Capturer) deadLetter(j *job, cause error) {
	c.metrics.deadLetters.Inc()
	if c.dead == nil {
		c.drop(context.Background(), j.ex, "refused by the store: "+cause.Error())
		c.finish(j)
		return
	}
	payload, err := j.encoded()
	if err != nil {
		c.drop(context.Background(), j.ex, "refused by the store and cannot be encoded: "+err.Error())
		c.finish(j)
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	err = c.dead.DeadLetter(ctx, memory.DeadLetter{
		Exchange: j.ex.ID, Identity: j.ex.Identity, Reason: deadReason(cause), Payload: payload, At: j.ex.At, Received: j.ex.Received,
	})
	cancel()
	if err != nil {
		c.drop(context.Background(), j.ex, "refused by the store and not set aside: "+err.Error())
	} else {
		c.logger.Error("capture set aside an exchange the store refuses", "exchange", j.ex.ID,
			"request_id", j.ex.RequestID, "tenant", j.ex.Tenant, "conversation", j.ex.Conversation, "err", cause)
	}
	c.finish(j)
}

// deadReason is the stored reason of a dead letter: the error's text, valid
// UTF-8, at most 1000 bytes.
func deadReason(err error) string {
	s, _ := SanitizeText(err.Error())
	if len(s) > 1000 {
		s = strings.ToValidUTF8(s[:1000], "")
	}
	return s
}

// enqueueEnrichment hands stored exchanges to the enrichment queue, in one
// call when the queue takes batches. A failure is retried once at once;
// then the exchanges are stored without enrichment, counted and logged.
// A queue that hangs is neither retried nor tried again for OpTimeout
// after its enqueue ran out of it (the exchanges meanwhile go without
// enrichment, counted): the lane's next turns wait behind this call, and
// one hung enqueue after each save would hold them past SaveWait, answered
// before they are stored.
func (c *Capturer) enqueueEnrichment(jobs []*job, results []memory.SaveResult) {
	if c.enrich == nil || len(jobs) == 0 {
		return
	}
	payloads := make([][]byte, 0, len(jobs))
	for i, j := range jobs {
		if results[i].Dropped {
			continue
		}
		p, err := encodeEnrichment(j.ex, results[i], j.start)
		if err != nil {
			c.metrics.failures.WithLabelValues("encode").Inc()
			continue
		}
		payloads = append(payloads, p)
	}
	if hung := c.enrichHungAt.Load(); hung != 0 && time.Since(time.Unix(0, hung)) < c.opts.OpTimeout {
		c.metrics.failures.WithLabelValues("enrich_enqueue").Inc()
		c.metrics.enrichLost.Add(float64(len(payloads)))
		return
	}
	var err error
	for range 2 {
		if err = enqueueAll(c.ctx, c.enrich, payloads, c.opts.OpTimeout); err == nil {
			return
		}
		if errors.Is(err, context.DeadlineExceeded) {
			c.enrichHungAt.Store(time.Now().UnixNano())
			break
		}
	}
	c.metrics.failures.WithLabelValues("enrich_enqueue").Inc()
	c.metrics.enrichLost.Add(float64(len(payloads)))
	c.logger.Warn("capture cannot queue stored exchanges for enrichment; they stay stored without it", "exchanges", len(payloads), "err", err)
}

// enqueueAll appends payloads to q in order, within timeout. It does not
// wait past timeout for a call that outlasts its deadline (go-redis
// dialing a Redis that accepts connections but answers nothing): that one
// fails with context.DeadlineExceeded, though its payloads may still land.
func enqueueAll(ctx context.Context, q Queue, payloads [][]byte, timeout time.Duration) error {
	if len(payloads) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- q.EnqueueBatch(ctx, payloads)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return fmt.Errorf("enqueue not done within %s: %w", timeout, ctx.Err())
		}
	}
}

// lockChats takes the chat locks of batch's exchanges (see ChatLocks),
// waiting at most OpTimeout for them, and returns them held. When they
// cannot be taken (the store away, another store of a chat holding them
// that long) the hold holds none of them, counted and logged: the batch's
// chat turns are then not stored under it but go to the capture queue,
// or are retried (storeOne); its other turns are stored as usual.
func (c *Capturer) lockChats(batch []*job) *chatHold {
	exs := make([]memory.Exchange, len(batch))
	for i, j := range batch {
		exs[i] = j.ex
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	defer cancel()
	hold, err := c.chats.lock(ctx, exs...)
	if err != nil {
		c.metrics.failures.WithLabelValues("chat_lock").Inc()
		c.logger.Warn("capture cannot take its chats' locks; their turns are not stored without them", "exchanges", len(batch), "err", err)
	}
	return hold
}

// tryLockChats takes the chat locks of batch's exchanges, as lockChats
// does, when no other store holds one of them; it never waits for them.
// Not taken (another store holds one, or the store failed), the hold it
// returns holds none of them: lockChats is the caller's next step.
func (c *Capturer) tryLockChats(batch []*job) *chatHold {
	exs := make([]memory.Exchange, len(batch))
	for i, j := range batch {
		exs[i] = j.ex
	}
	hold := c.chats.hold(exs...)
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	defer cancel()
	if _, err := hold.tryTake(ctx); err != nil {
		c.logger.Debug("capture cannot try its chats' locks; waiting for them", "exchanges", len(batch), "err", err)
	}
	return hold
}

// unqueued returns the jobs of batch whose conversations are not in
// queued, in a slice of their own.
func unqueued(batch []*job, queued map[memory.Identity]bool) []*job {
	out := make([]*job, 0, len(batch))
	for _, j := range batch {
		if !queued[j.ex.Identity] {
			out = append(out, j)
		}
	}
	return out
}

// adoptions keeps a full-history chat's turns in one conversation before
// a batch is stored (see Adopter): under hold, an exchange of a derived
// conversation first adopts the chat's first turns from the default
// conversation, and a first turn whose continuation was stored ahead of
// it is done with, a duplicate (ready); a job whose conversation is in
// queued is left for the capture queue, neither adopted nor checked. It
// returns the jobs still to store, and whether every one of them is
// ready to be saved under hold (false: one is queued, hold not taken, or
// an adoption or a check failed, and the batch is stored one by one,
// those jobs handled as failed saves).
func (c *Capturer) adoptions(batch []*job, hold *chatHold, queued map[memory.Identity]bool) (keep []*job, ready bool) {
	keep, ready = batch[:0], true
	for _, j := range batch {
		if queued[j.ex.Identity] {
			keep, ready = append(keep, j), false // to the capture queue (storeOne)
			continue
		}
		ahead, err := c.ready(j, hold, false)
		if err != nil {
			ready = false
		} else if ahead {
			c.saved(j, memory.SaveResult{Duplicate: true})
			continue
		}
		keep = append(keep, j)
	}
	return keep, ready
}
