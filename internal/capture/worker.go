package capture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/prometheus/client_golang/prometheus"
)

// WorkerOptions tunes a Worker. Zero fields take the defaults noted.
type WorkerOptions struct {
	// Consumer names this worker in the queue (default host-pid).
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
	// hook batch: a BatchHook once per batch, any other Hook once per
	// exchange. Entries whose hooks failed are redelivered, up to
	// MaxHookAttempts deliveries.
	Hooks []Hook
	// HookDelay is how long stored exchanges may wait for more to join
	// their hook batch (up to Batch exchanges), so that under light load
	// the hooks still run over several exchanges at once (default 0: right
	// after each claimed batch is stored). The exchanges are readable as soon
	// as they are stored; their entries stay claimed, and unacknowledged,
	// until the hooks ran. At most StaleAfter/4.
	HookDelay time.Duration
}

func (o WorkerOptions) withDefaults() WorkerOptions {
	if o.Consumer == "" {
		host, _ := os.Hostname()
		o.Consumer = fmt.Sprintf("%s-%d", host, os.Getpid())
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
	o.HookDelay = min(max(o.HookDelay, 0), o.StaleAfter/4)
	return o
}

// Worker drains the capture queue into the store. Each entry is acknowledged
// only after its exchange is committed and, with WorkerOptions.Hooks, its
// after-save hooks ran, so a worker that dies in between leaves it to be
// redelivered: the store's idempotent save keeps it from being stored twice
// and reports it as a duplicate, for which the hooks run again. The hooks
// run on a second goroutine, batch by batch in storage order, while the
// next exchanges are stored.
type Worker struct {
	queue  Queue
	saver  Saver
	logger *slog.Logger
	opts   WorkerOptions

	saved, duplicates, dropped, poison prometheus.Counter
	failures                           *prometheus.CounterVec
	lag                                prometheus.Histogram
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
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_capture_worker_failures_total",
			Help: "Worker failures by stage (claim, save, hook, ack; hook_gave_up: acknowledged after MaxHookAttempts); the entries are retried.",
		}, []string{"stage"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_capture_lag_seconds",
			Help:    "Time from the exchange to its storage by the worker.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10),
		}),
	}
}

// Collectors returns the Worker's metrics for the caller to register.
func (w *Worker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{w.saved, w.duplicates, w.dropped, w.poison, w.failures, w.lag}
}

// Run claims and stores batches until ctx is cancelled, then returns nil.
// A failed save leaves the entry and the rest of its batch unacknowledged —
// they are redelivered after StaleAfter, in order — and backs off.
func (w *Worker) Run(ctx context.Context) error {
	delay := w.opts.BackoffBase
	backoff := func() bool {
		t := time.NewTimer(delay)
		defer t.Stop()
		delay = min(2*delay, w.opts.BackoffMax)
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var held hookBatch
	hooks := w.startHooks(ctx)
	// On the way out the held exchanges get their hooks, within a bound;
	// whatever does not finish is redelivered.
	defer func() { hooks.stop(held) }()
	for {
		if ctx.Err() != nil {
			return nil
		}
		block := w.opts.Block
		if len(held.ds) > 0 {
			block = max(time.Millisecond, min(block, w.opts.HookDelay-time.Since(held.since)))
		}
		ds, err := w.queue.Claim(ctx, w.opts.Consumer, w.opts.Batch, w.opts.StaleAfter, block)
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
	err := runHooks(ctx, w.opts.Hooks, held.exs, held.results)
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

// process stores a batch in order, acknowledging what needs no hooks (poison,
// dropped, or no hooks configured) and adding the rest to held for the
// hooks. It stops at the first failed save and returns its error.
func (w *Worker) process(ctx context.Context, ds []memory.Delivery, held *hookBatch) error {
	acks := make([]string, 0, len(ds))
	var failed error
	for _, d := range ds {
		var ex memory.Exchange
		if err := json.Unmarshal(d.Payload, &ex); err != nil || ex.ID == "" {
			w.poison.Inc()
			w.logger.Error("capture worker discards an undecodable entry", "entry", d.ID, "bytes", len(d.Payload), "err", err)
			acks = append(acks, d.ID)
			continue
		}
		res, err := w.saver.SaveExchange(ctx, ex)
		if err != nil && errors.Is(err, ErrHook) && d.Attempts >= MaxHookAttempts {
			w.failures.WithLabelValues("hook_gave_up").Inc()
			w.logger.Error("capture worker gives up on after-save hooks; the exchange is stored", "entry", d.ID, "exchange", ex.ID, "attempts", d.Attempts, "err", err)
			err = nil
		}
		if err != nil {
			if errors.Is(err, memory.ErrInvalid) {
				w.poison.Inc()
				w.logger.Error("capture worker discards an exchange the store rejects", "entry", d.ID, "exchange", ex.ID, "err", err)
				acks = append(acks, d.ID)
				continue
			}
			w.failures.WithLabelValues("save").Inc()
			w.logger.Warn("capture worker cannot save; will retry", "entry", d.ID, "exchange", ex.ID, "attempts", d.Attempts, "err", err)
			failed = fmt.Errorf("save exchange %s: %w", ex.ID, err)
			break
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
		if len(w.opts.Hooks) == 0 || res.Dropped {
			acks = append(acks, d.ID)
			continue
		}
		if len(held.ds) == 0 {
			held.since = time.Now()
		}
		held.exs, held.results, held.ds = append(held.exs, ex), append(held.results, res), append(held.ds, d)
	}
	return errors.Join(failed, w.ack(ctx, acks))
}
