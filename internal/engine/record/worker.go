package record

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/prometheus/client_golang/prometheus"
)

// WorkerOptions tunes a Worker. Zero fields take the defaults noted.
type WorkerOptions struct {
	// Consumer names this worker in the queue and its lease (default
	// ProcessConsumer's name).
	Consumer string
	// Batch is how many entries one Claim takes (default 32).
	Batch int
	// StaleAfter is when another consumer's unacknowledged entries are
	// reclaimed (default 30s).
	StaleAfter time.Duration
	// Block is how long one Claim waits for new entries (default 2s).
	Block time.Duration
	// BackoffBase and BackoffMax bound the wait after a failed Claim or save
	// (defaults 100ms and 10s).
	BackoffBase, BackoffMax time.Duration
	// Hooks run, in order, after exchanges are stored and before their
	// entries are acknowledged, over the stored and duplicate exchanges of a
	// hook batch, each hook once per batch. Entries whose hooks failed are redelivered, up to
	// MaxHookAttempts deliveries.
	Hooks []Hook
	// Enrich, when set, is where stored exchanges go for enrichment
	// (engine/enrich's Enricher runs the after-save hooks): the worker then
	// only stores, and Hooks are not run.
	Enrich Queue
	// DeadLetters keeps the exchanges the store refuses for good; nil:
	// they are dropped (counted and logged).
	DeadLetters DeadLetterer
	// Adopter keeps a full-history chat's first turn in the chat's
	// conversation (see Adopter); nil: it stays where it was stored.
	Adopter Adopter
	// Router stores an exchange its conversation refused (another chat
	// that opened alike got there first: memory.Exchange.BranchSeed) in
	// the branch its history continues (Router.Reroute); nil: such an
	// exchange is stored where it is, as an edit.
	Router Rerouter
	// Chats serializes the storing of a full-history chat's first turn
	// and of its continuation with the Capturer's and other processes'
	// (see ChatLocks): the process's one, shared with its Capturer, over
	// the store's ChatLocker. Nil: none.
	Chats *ChatLocks
	// Lease, when set, lets one worker at a time drain the queue
	// (redis.Queue and sqlite.Outbox grant leases); nil: every worker
	// drains it.
	Lease Leaser
	// Prune are the queues (the capture queue and its siblings, on Redis)
	// whose consumers that hold nothing and have been idle for an hour
	// the worker removes, as it starts and every 10 minutes (see
	// ConsumerPruner); nil: none.
	Prune []ConsumerPruner
	// MaxAttempts is how many times a save failing with an error that is
	// neither invalid input nor an unreachable store is tried before the
	// exchange is set aside as a dead letter (default 5).
	MaxAttempts int
	// HookDelay is how long stored exchanges may wait for more to join
	// their hook batch (up to Batch exchanges), so that under light load
	// the hooks still run over several exchanges at once (default 0: right
	// after each claimed batch is stored). The exchanges are readable as soon
	// as they are stored; their entries stay claimed, and unacknowledged,
	// until the hooks ran. At most StaleAfter/4.
	HookDelay time.Duration
	// LockStuckAfter is how long a queued chat turn may wait for its
	// chat's lock — not taken, or lost before each save — before the
	// worker reports it stuck: logged at error once, counted
	// (failures{stage="chat_lock_stuck"}) and shown by the gauge
	// memgate_capture_worker_lock_stuck until it is stored. The turn is
	// kept and still retried: a lock that never holds is a deployment to
	// fix (a pooler not in session mode), not a turn to drop. Default 5m,
	// five chat lock leases.
	LockStuckAfter time.Duration
}

// ProcessConsumer returns a consumer name of its own for each call: the
// host, the pid and a random suffix. A queue's lease is held by a name
// (Leaser), so two processes that took one name would both hold it and
// split a backlog between them, a conversation's turns stored out of
// order; host and pid alone are alike for two containers of one pod, or
// two on the host's network, each its pid 1.
func ProcessConsumer() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (o WorkerOptions) withDefaults() WorkerOptions {
	if o.Consumer == "" {
		o.Consumer = ProcessConsumer()
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 30 * time.Second
	}
	if o.Block <= 0 {
		o.Block = 2 * time.Second
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 100 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffBase {
		o.BackoffMax = max(10*time.Second, o.BackoffBase)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.LockStuckAfter <= 0 {
		o.LockStuckAfter = 5 * time.Minute
	}
	o.HookDelay = min(max(o.HookDelay, 0), o.StaleAfter/4)
	return o
}

// Worker drains the capture queue — exchanges the Capturer could not store
// on the request path, and those of older versions — into the store, in
// queue order. Each entry is acknowledged only after its exchange is
// committed and either queued for enrichment (WorkerOptions.Enrich) or, with
// WorkerOptions.Hooks, its after-save hooks ran, so a worker that dies in
// between leaves it to be redelivered: the store's idempotent save keeps it
// from being stored twice and reports it as a duplicate. A failed save is
// retried at once and then with backoff, in place, holding the rest of the
// batch behind it, so a conversation's turns are stored in the order they
// were queued; one the store refuses for good is set aside as a dead letter
// (with WorkerOptions.DeadLetters) and the batch goes on. With a lease
// (WorkerOptions.Lease: redis.Queue's, sqlite.Outbox's), only the lease
// holder drains it, so two workers never split a backlog and store its
// turns out of order, and a worker that starts or takes the lease over
// first reclaims, at once, what a stopped one left claimed. The
// hooks run on a second goroutine, batch by batch in storage order, while
// the next exchanges are stored.
type Worker struct {
	queue  Queue
	saver  Saver
	logger *slog.Logger
	opts   WorkerOptions

	saved, duplicates, dropped, poison, dead prometheus.Counter
	failures                                 *prometheus.CounterVec
	lag                                      prometheus.Histogram
	// lockStuck is 1 while the entry being stored has waited for its
	// chat's lock longer than LockStuckAfter.
	lockStuck prometheus.Gauge
}

// NewWorker returns a Worker; logger may be nil.
func NewWorker(q Queue, saver Saver, logger *slog.Logger, opts WorkerOptions) *Worker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{
		queue:  q,
		saver:  saver,
		logger: logger,
		opts:   opts.withDefaults(),
		saved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_saved_total",
			Help: "Queued exchanges the worker stored.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_duplicates_total",
			Help: "Queued exchanges that had been stored before (redeliveries).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_erased_total",
			Help: "Queued exchanges discarded because their user was erased.",
		}),
		poison: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_poison_total",
			Help: "Queue entries acknowledged without storing: undecodable or rejected as invalid.",
		}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_worker_dead_letters_total",
			Help: "Queued exchanges the store refused for good, set aside as dead letters.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_capture_worker_failures_total",
			Help: "Worker failures by stage (claim, save, chat_lock, chat_lock_lost, hook, ack, prune; hook_gave_up: acknowledged after MaxHookAttempts; chat_lock_stuck: a turn waited for its chat's lock past LockStuckAfter); the entries are retried.",
		}, []string{"stage"}),
		lockStuck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memgate_capture_worker_lock_stuck",
			Help: "1 while the worker's current queued turn has waited for its chat's lock longer than 5 minutes (not taken, or lost before each save: a PostgreSQL pooler not in session mode?); the turn is kept and retried.",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_capture_lag_seconds",
			Help:    "Time from the exchange to its storage by the worker.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10),
		}),
	}
}

// Collectors returns the Worker's metrics for the caller to register.
func (w *Worker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{w.saved, w.duplicates, w.dropped, w.poison, w.dead, w.failures, w.lag, w.lockStuck}
}

// Run claims and stores batches until ctx is cancelled, then returns nil.
// A failed save is retried in place until it succeeds, the store refuses it
// for good, or ctx ends (the entry and the rest of its batch are then
// redelivered, in order).
func (w *Worker) Run(ctx context.Context) error {
	delay := w.opts.BackoffBase
	backoff := func() bool {
		d := delay
		delay = min(2*delay, w.opts.BackoffMax)
		return pace.Sleep(ctx, d)
	}
	if len(w.opts.Prune) > 0 {
		pctx, stop := context.WithCancel(ctx)
		pruned := make(chan struct{})
		go func() { defer close(pruned); w.prune(pctx) }()
		defer func() { stop(); <-pruned }()
	}
	var held hookBatch
	hooks := w.startHooks(ctx)
	// On the way out the held exchanges get their hooks, within a bound;
	// whatever does not finish is redelivered. Then the lease is given up,
	// so that the next worker (the next run of this process, once it
	// restarts) need not wait for it to run out.
	defer func() {
		hooks.stop(held)
		w.release(ctx)
	}()
	// reclaim: with a lease, the entries claimed and not acknowledged when
	// this worker starts, or takes the lease over, were left by a worker
	// that stopped — another one, or this process's previous run under the
	// same name (a container's host and pid 1), whose lease it renews. They
	// are the oldest of the queue: they are claimed first, at once, before
	// any newer entry, so that none is stored ahead of them. It lasts until
	// a claim comes back short or with a first delivery: the stale entries
	// come first, so none is left.
	reclaim := true
	for {
		if ctx.Err() != nil {
			return nil
		}
		block := w.opts.Block
		if len(held.ds) > 0 {
			block = max(time.Millisecond, min(block, w.opts.HookDelay-time.Since(held.since)))
		}
		stale := w.opts.StaleAfter
		mine, taken, err := w.lease(ctx)
		if err == nil && !mine {
			// Another worker drains the queue; stand by.
			if !hooks.hand(ctx, &held) || !pace.Sleep(ctx, w.opts.Block) {
				return nil
			}
			continue
		}
		reclaim = reclaim || taken
		if reclaim && w.opts.Lease != nil {
			stale = 0 // every claimed entry
		}
		var ds []memory.Delivery
		if err == nil {
			ds, err = w.queue.Claim(ctx, w.opts.Consumer, w.opts.Batch, stale, block)
			if err == nil {
				reclaim = reclaim && allRedelivered(ds, w.opts.Batch)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.failures.WithLabelValues("claim").Inc()
			w.logger.Warn("capture worker cannot claim", "err", err)
			if !hooks.hand(ctx, &held) || !backoff() {
				return nil
			}
			continue
		}
		err = w.process(ctx, ds, &held)
		if err != nil || len(held.ds) >= w.opts.Batch || len(held.ds) > 0 && time.Since(held.since) >= w.opts.HookDelay {
			if !hooks.hand(ctx, &held) {
				return nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !backoff() {
				return nil
			}
			continue
		}
		delay = w.opts.BackoffBase
	}
}

// hookStage runs the hooks of stored exchanges on its own goroutine, batch
// after batch in the order they were stored, while the worker stores the
// next ones: a store that waits on a server (PostgreSQL) then overlaps the
// saves with the hooks' writes. Its channel holds one batch, so the saves
// stay at most two batches ahead of the hooks.
type hookStage struct {
	w      *Worker
	in     chan hookBatch
	cancel context.CancelFunc
	done   chan struct{}
}

// startHooks starts the hook stage. Its context survives ctx, so that
// what was stored before ctx ended still gets its hooks; stop bounds that.
func (w *Worker) startHooks(ctx context.Context) *hookStage {
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &hookStage{w: w, in: make(chan hookBatch, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		delay := w.opts.BackoffBase
		for hb := range h.in {
			if err := w.flush(hctx, &hb); err != nil && hctx.Err() == nil {
				// The entries are redelivered; wait before the next batch
				// (the saves wait for room meanwhile).
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-hctx.Done():
				}
				t.Stop()
				delay = min(2*delay, w.opts.BackoffMax)
				continue
			}
			delay = w.opts.BackoffBase
		}
	}()
	return h
}

// hand passes the held exchanges to the hook stage and empties held. It
// returns false, keeping held, when ctx ends first.
func (h *hookStage) hand(ctx context.Context, held *hookBatch) bool {
	if len(held.ds) == 0 {
		return true
	}
	select {
	case h.in <- *held:
		*held = hookBatch{}
		return true
	case <-ctx.Done():
		return false
	}
}

// stop hands over what is still held, lets the stage finish for up to 5s,
// then cancels what remains (those entries are redelivered) and waits.
func (h *hookStage) stop(held hookBatch) {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	if len(held.ds) > 0 {
		select {
		case h.in <- held:
		case <-t.C:
			h.cancel()
		}
	}
	close(h.in)
	select {
	case <-h.done:
	case <-t.C:
		h.cancel()
		<-h.done
	}
	h.cancel()
}

// MaxHookAttempts is how many deliveries an entry whose after-save hooks fail
// gets before it is acknowledged anyway.
const MaxHookAttempts = 5

// hookBatch is stored exchanges waiting for the hooks, with their deliveries.
type hookBatch struct {
	exs     []memory.Exchange
	results []memory.SaveResult
	ds      []memory.Delivery
	since   time.Time // when the first of them was stored
}

// flush runs the hooks over the held exchanges and acknowledges their
// entries: all of them when the hooks succeed, else only those that had
// their last attempt (which exchange failed is not known: the others are
// redelivered). It empties held and returns the hooks' or the ack's error.
func (w *Worker) flush(ctx context.Context, held *hookBatch) error {
	if len(held.ds) == 0 {
		return nil
	}
	defer func() { *held = hookBatch{} }()
	var acks []string
	err := RunHooks(ctx, w.opts.Hooks, held.exs, held.results)
	if err != nil {
		w.failures.WithLabelValues("hook").Inc()
		for _, d := range held.ds {
			if d.Attempts >= MaxHookAttempts {
				w.failures.WithLabelValues("hook_gave_up").Inc()
				w.logger.Error("capture worker gives up on after-save hooks; the exchange is stored", "entry", d.ID, "attempts", d.Attempts, "err", err)
				acks = append(acks, d.ID)
			}
		}
		w.logger.Warn("capture worker after-save hooks failed; will retry", "entries", len(held.ds), "err", err)
	} else {
		for _, d := range held.ds {
			acks = append(acks, d.ID)
		}
	}
	return errors.Join(err, w.ack(ctx, acks))
}

// ack acknowledges entries whose work is committed, even if ctx was just
// cancelled.
func (w *Worker) ack(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	err := w.queue.Ack(actx, ids...)
	cancel()
	if err != nil {
		w.failures.WithLabelValues("ack").Inc()
		w.logger.Warn("capture worker cannot acknowledge; entries will be redelivered", "entries", len(ids), "err", err)
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// allRedelivered reports whether ds is a full batch of entries delivered
// before: there may be more of them to reclaim.
func allRedelivered(ds []memory.Delivery, batch int) bool {
	if len(ds) < batch {
		return false
	}
	for _, d := range ds {
		if d.Attempts <= 1 {
			return false
		}
	}
	return true
}

// Leaser grants a queue to one consumer at a time.
type Leaser interface {
	// Lease takes or renews consumer's lease for ttl: held reports that
	// consumer holds it, taken that it was just taken.
	Lease(ctx context.Context, consumer string, ttl time.Duration) (held, taken bool, err error)
	// Release gives consumer's lease up, if consumer holds it.
	Release(ctx context.Context, consumer string) error
}

// leaseTTL is how long the worker's lease on the queue lasts without
// renewal (it renews it before every claim and every save attempt).
func (w *Worker) leaseTTL() time.Duration { return max(4*w.opts.Block, 5*time.Second) }

// lease takes or renews the worker's lease with WorkerOptions.Lease;
// without one every worker may drain the queue (held is true).
func (w *Worker) lease(ctx context.Context) (held, taken bool, err error) {
	if w.opts.Lease == nil {
		return true, false, nil
	}
	return w.opts.Lease.Lease(ctx, w.opts.Consumer, w.leaseTTL())
}

// release gives up the worker's lease, if it holds it. Whatever it left
// claimed is reclaimed at once by the next holder.
func (w *Worker) release(ctx context.Context) {
	if w.opts.Lease == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := w.opts.Lease.Release(rctx, w.opts.Consumer); err != nil {
		w.logger.Warn("capture worker cannot give up its lease; the next worker waits for it to run out", "err", err)
	}
}

// process stores a batch in order, acknowledging what needs no hooks
// (poison, dead letters, dropped, everything once queued for enrichment, or
// no hooks configured) and adding the rest to held for the hooks. A failed
// save is retried in place; process returns an error only when ctx ended
// (or an after-save hook failed) before the batch was through, leaving the
// rest of it for redelivery.
func (w *Worker) process(ctx context.Context, ds []memory.Delivery, held *hookBatch) error {
	acks := make([]string, 0, len(ds))
	var (
		failed   error
		enrich   [][]byte
		enrichAt []string
	)
	for _, d := range ds {
		var ex memory.Exchange
		if err := json.Unmarshal(d.Payload, &ex); err != nil || ex.ID == "" {
			w.poison.Inc()
			w.logger.Error("capture worker discards an undecodable entry", "entry", d.ID, "bytes", len(d.Payload), "err", err)
			acks = append(acks, d.ID)
			continue
		}
		res, done, err := w.save(ctx, d, &ex)
		if err != nil {
			failed = err
			break
		}
		if done {
			acks = append(acks, d.ID)
			continue
		}
		switch {
		case res.Duplicate:
			w.duplicates.Inc()
		case res.Dropped:
			w.dropped.Inc()
		default:
			w.saved.Inc()
			if !ex.At.IsZero() {
				w.lag.Observe(time.Since(ex.At).Seconds())
			}
		}
		if w.opts.Enrich != nil && !res.Dropped {
			p, err := EncodeEnrichment(ex, res)
			if err == nil {
				enrich, enrichAt = append(enrich, p), append(enrichAt, d.ID)
				continue
			}
		}
		if w.opts.Enrich != nil || len(w.opts.Hooks) == 0 || res.Dropped {
			acks = append(acks, d.ID)
			continue
		}
		if len(held.ds) == 0 {
			held.since = time.Now()
		}
		held.exs, held.results, held.ds = append(held.exs, ex), append(held.results, res), append(held.ds, d)
	}
	if len(enrich) > 0 {
		var err error
		for range 2 {
			if err = enqueueAll(context.WithoutCancel(ctx), w.opts.Enrich, enrich, 5*time.Second); err == nil {
				break
			}
		}
		if err != nil {
			w.failures.WithLabelValues("enrich_enqueue").Inc()
			w.logger.Warn("capture worker cannot queue stored exchanges for enrichment; they stay stored without it", "exchanges", len(enrich), "err", err)
		}
		acks = append(acks, enrichAt...)
	}
	return errors.Join(failed, w.ack(ctx, acks))
}

// save stores one queued exchange, retrying a failure in place: at once,
// then with backoff, renewing the lease before each attempt. A chat turn
// is saved only under its chat's locks, adopted and checked under them
// (lockAndCheck): when they cannot be taken, or its adoption or check fails,
// it is not saved, and that counts as a failed attempt; its entry stays
// in the queue, the batch behind it waiting, until they can (a holder
// that froze loses them when their lease runs out). An exchange its
// conversation refuses (memory.SaveResult.Parted) goes to the
// conversation its history continues (WorkerOptions.Router), *ex then
// naming it. done reports that the entry is finished without a result to
// record (set aside as a dead letter, or stored but its after-save hooks
// gave up). It returns an error only when ctx ends first, or for a failed
// after-save hook (left to redelivery, as before).
func (w *Worker) save(ctx context.Context, d memory.Delivery, ex *memory.Exchange) (res memory.SaveResult, done bool, err error) {
	delay := w.opts.BackoffBase
	// From the adoption to the save (which records the candidate), no
	// first turn of ex's chat is stored elsewhere, in this process or
	// another, nor a continuation of it.
	hold := w.opts.Chats.hold(*ex)
	defer hold.unlock()
	var checked, reroutes, lost int
	stuck := w.stuckWatch(d, *ex)
	defer stuck.done()
	for attempt := 1; ; attempt++ {
		var ahead bool
		// The adoption and the check are bounded by ctx alone, as the
		// save is: a chat's many first turns moved on a loaded store
		// may take longer than one wait for its lock.
		ahead, err = lockAndCheck(ctx, hold, w.lockWait(), 0, w.opts.Adopter, *ex, &checked, w.logger)
		if err == nil && ahead {
			return memory.SaveResult{Duplicate: true}, false, nil
		}
		if err == nil {
			res, err = w.saver.SaveExchange(ctx, hold.fenced(*ex))
			if err == nil && res.Parted {
				if err = w.reroute(ctx, ex, &reroutes); err == nil {
					checked = 0 // adopted and checked again where it goes
					attempt--
					continue
				}
			}
		}
		switch {
		case err == nil:
			return res, false, nil
		case errors.Is(err, errUnlocked):
			if ctx.Err() != nil {
				return res, false, fmt.Errorf("save exchange %s: %w", ex.ID, err)
			}
			w.failures.WithLabelValues("chat_lock").Inc()
			stuck.failed(err)
			if attempt == 1 || attempt%10 == 0 {
				w.logger.Warn("capture worker cannot take a chat's lock; its turn waits in the queue", "entry", d.ID, "exchange", ex.ID, "attempt", attempt, "err", err)
			}
		case errors.Is(err, memory.ErrLockLost):
			// The worker stalled past the chat lock's lease, and the store
			// refused the write: another process may have stored the
			// chat's turns meanwhile. Take the lock again and look again:
			// at once the first time, after a wait the next.
			hold.unlock()
			w.failures.WithLabelValues("chat_lock_lost").Inc()
			w.logger.Warn("capture worker lost a chat's lock before its save; storing it again under the lock", "entry", d.ID, "exchange", ex.ID)
			stuck.failed(err)
			if lost++; lost == 1 {
				continue
			}
		case errors.Is(err, ErrHook) && d.Attempts >= MaxHookAttempts:
			w.failures.WithLabelValues("hook_gave_up").Inc()
			w.logger.Error("capture worker gives up on after-save hooks; the exchange is stored", "entry", d.ID, "exchange", ex.ID, "attempts", d.Attempts, "err", err)
			return res, true, nil
		default:
			w.failures.WithLabelValues("save").Inc()
			if errors.Is(err, ErrHook) {
				w.logger.Warn("capture worker after-save hooks failed; will retry", "entry", d.ID, "exchange", ex.ID, "attempts", d.Attempts, "err", err)
				return res, false, fmt.Errorf("save exchange %s: %w", ex.ID, err)
			}
			if errors.Is(err, memory.ErrInvalid) || !transient(err) && attempt >= w.opts.MaxAttempts {
				w.deadLetter(ctx, d, *ex, err)
				return res, true, nil
			}
			if attempt == 1 || attempt%10 == 0 {
				w.logger.Warn("capture worker cannot save; retrying", "entry", d.ID, "exchange", ex.ID, "attempt", attempt, "err", err)
			}
		}
		if attempt > 1 {
			if !pace.Sleep(ctx, delay) {
				return res, false, fmt.Errorf("save exchange %s: %w", ex.ID, err)
			}
			delay = min(2*delay, w.opts.BackoffMax)
		}
		if ctx.Err() != nil {
			return res, false, fmt.Errorf("save exchange %s: %w", ex.ID, err)
		}
		if held, _, lerr := w.lease(ctx); lerr == nil && !held {
			// The lease ran out and another worker took the queue: it
			// redoes this entry and what follows, in order.
			return res, false, fmt.Errorf("save exchange %s: lease lost: %w", ex.ID, err)
		}
	}
}

// lockStuckWatch tells, for one queued turn, when it has waited for its
// chat's lock longer than WorkerOptions.LockStuckAfter (Worker.stuckWatch).
type lockStuckWatch struct {
	w        *Worker
	d        memory.Delivery
	ex       memory.Exchange
	since    time.Time // the turn's first lock failure; zero: none yet
	reported bool
}

// stuckWatch returns the watch of ex's waits for its chat's lock.
func (w *Worker) stuckWatch(d memory.Delivery, ex memory.Exchange) *lockStuckWatch {
	return &lockStuckWatch{w: w, d: d, ex: ex}
}

// failed records a failure to take, or to keep, the turn's chat lock.
// Past LockStuckAfter from the first, it reports the turn stuck, once:
// logged at error with the likely causes, counted, the gauge raised.
func (s *lockStuckWatch) failed(err error) {
	if s.since.IsZero() {
		s.since = time.Now()
	}
	waited := time.Since(s.since)
	if s.reported || waited < s.w.opts.LockStuckAfter {
		return
	}
	s.reported = true
	s.w.lockStuck.Inc()
	s.w.failures.WithLabelValues("chat_lock_stuck").Inc()
	s.w.logger.Error("capture worker cannot store a queued turn under its chat's lock; the turn is kept and retried, "+
		"the queue behind it waits: another store holds the chat that long, or the chat locks never hold "+
		"(PostgreSQL behind a pooler not in session mode, connections reaching different servers)",
		"entry", s.d.ID, "exchange", s.ex.ID, "waited", waited.Round(time.Second), "err", err)
}

// done ends the watch: the turn is stored or left for redelivery.
func (s *lockStuckWatch) done() {
	if s.reported {
		s.w.lockStuck.Dec()
		s.w.logger.Info("capture worker is past the turn that waited for its chat's lock", "entry", s.d.ID, "exchange", s.ex.ID)
	}
}

// lockWait bounds one wait for a chat's locks (workerChatLockWait), and
// with a lease to half its term, so that the worker renews its lease
// between two waits and keeps the queue while a chat's holder keeps it
// waiting.
func (w *Worker) lockWait() time.Duration {
	if w.opts.Lease == nil {
		return workerChatLockWait
	}
	return min(workerChatLockWait, w.leaseTTL()/2)
}

// reroute moves ex, which its conversation refused, to the conversation
// its history continues now (WorkerOptions.Router), as Capturer.reroute
// does; *reroutes counts the moves. An error is a failed read, ex
// unchanged.
func (w *Worker) reroute(ctx context.Context, ex *memory.Exchange, reroutes *int) error {
	if w.opts.Router == nil || *reroutes >= maxReroutes {
		w.logger.Warn("capture worker stores an exchange its conversation parts from as an edit",
			"exchange", ex.ID, "conversation", ex.Conversation, "reroutes", *reroutes)
		ex.BranchSeed = ""
		return nil
	}
	moved, err := w.opts.Router.Reroute(ctx, *ex)
	if err != nil {
		return err
	}
	*reroutes++
	*ex = moved
	return nil
}

// deadLetter sets aside an exchange the store refuses for good.
func (w *Worker) deadLetter(ctx context.Context, d memory.Delivery, ex memory.Exchange, cause error) {
	w.dead.Inc()
	dl := w.opts.DeadLetters
	if dl == nil {
		w.poison.Inc()
		w.logger.Error("capture worker discards an exchange the store rejects", "entry", d.ID, "exchange", ex.ID, "err", cause)
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := dl.DeadLetter(dctx, memory.DeadLetter{
		Exchange: ex.ID, Identity: ex.Identity, Reason: deadReason(cause), Payload: d.Payload, At: ex.At, Received: ex.Received,
	}); err != nil {
		w.poison.Inc()
		w.logger.Error("capture worker discards an exchange the store rejects and cannot set aside", "entry", d.ID, "exchange", ex.ID, "err", err)
		return
	}
	w.logger.Error("capture worker set aside an exchange the store refuses", "entry", d.ID, "exchange", ex.ID, "err", cause)
}
