// Package engine is memgate's memory core as the request path sees it: an
// Engine prepares a memory-on request's prompt (engine/prompt, with
// engine/recall), records the finished exchange (engine/record, which
// queues each stored exchange for engine/enrich), and serves the
// management reads. It owns
// the connection to the memory store: started while the store is down, it
// answers as a memory that is down (memory.ErrUnavailable; captures
// dropped and counted) and keeps opening the core in the background until
// the store returns.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
)

// ErrStoreDown marks an Open failure to reach the store (as opposed to a
// configuration error): Start then keeps retrying.
var ErrStoreDown = errors.New("memory store unreachable")

// ErrNotConnected is what the engine answers while no core is connected.
var ErrNotConnected = fmt.Errorf("memory store not connected: %w", memory.ErrUnavailable)

// Retry pacing of the store connection while it is down, and the health
// check that keeps memgate_store_up current.
const (
	connectFirstRetry = time.Second
	connectMaxRetry   = 30 * time.Second
	storePingEvery    = 15 * time.Second
)

// Store is what the engine serves of the memory store besides the core's
// own reads and writes: the management API's and the inspector's reads,
// erasure, the savings counters, and whose each provider state is.
type Store interface {
	Ping(ctx context.Context) error
	Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error)
	Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error)
	ConversationPage(ctx context.Context, id memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error)
	DeleteConversation(ctx context.Context, id memory.Identity) error
	// ExpireTombstones deletes a few tombstones of conversations never
	// stored deleted before before (memory.TombstoneHorizon).
	ExpireTombstones(ctx context.Context, before time.Time) (int, error)
	DeleteUser(ctx context.Context, tenant, user string) error
	ErasedAt(ctx context.Context, tenant, user string) (time.Time, error)
	DeletedAt(ctx context.Context, id memory.Identity) (time.Time, error)
	Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error)
	Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error)
	Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error)
	Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error)
	SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error
	Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error)
	AddSavings(ctx context.Context, bs []memory.SavingsBucket) error
	// BindState and BoundStates record and check whose each provider
	// state is (memory.StateBinding; storetest.RunStates).
	BindState(ctx context.Context, b memory.StateBinding) error
	BoundStates(ctx context.Context, tenant, user string, sts []memory.ProviderState, now time.Time) ([]bool, error)
}

// ErasureNotices tells the other processes sharing the store that the
// user of tenant was erased, or one of their conversations deleted, so
// that they drop what they keep of the user that no revision guards
// (recall's vectors, the fact extraction model's answers). Publish queues
// the notice and never waits for its delivery.
type ErasureNotices interface {
	Publish(tenant, user string)
}

// Core is one opened memory core: the store and the parts wired over it.
type Core struct {
	Store    Store
	Prompt   *prompt.Assembler
	Capturer *record.Capturer
	// Router places a request of a derived conversation in the branch its
	// history continues (nil: it stays in the derived conversation).
	Router *record.Router
	// Recall is nil when recall is off.
	Recall *recall.Manager
	// Worker stores what waits in the capture queue (nil without one).
	Worker *record.Worker
	// Enricher runs the after-save hooks; EnrichInProcess says its queue
	// lives in this process's memory, so only this process can drain it.
	Enricher        *enrich.Enricher
	EnrichInProcess bool
	// QueueUnreachable says a capture queue other processes share (Redis)
	// is configured but could not be opened, so Capturer saves directly
	// and cannot tell that queue's oldest entry: this core's deletions
	// expire no tombstone (expireTombstones), which could still refuse a
	// turn waiting there.
	QueueUnreachable bool
	// Notices tells the other processes sharing the store of each
	// erasure and conversation deletion, once each (nil: none).
	Notices ErasureNotices
	// Collectors are the core's Prometheus collectors besides its parts'.
	Collectors []prometheus.Collector
	// Close releases the store and what was opened with it.
	Close func() error
}

// AllCollectors are the core's Prometheus collectors, its parts' included.
func (c *Core) AllCollectors() []prometheus.Collector {
	cs := append([]prometheus.Collector{}, c.Collectors...)
	cs = append(cs, c.Prompt.Collectors()...)
	cs = append(cs, c.Capturer.Collectors()...)
	if c.Worker != nil {
		cs = append(cs, c.Worker.Collectors()...)
	}
	if c.Enricher != nil {
		cs = append(cs, c.Enricher.Collectors()...)
	}
	return cs
}

// RunWorkers runs the capture worker and the enricher until ctx ends. With
// all false (the capture worker runs in other processes) only an
// in-process enrichment queue is drained here, since no other process can
// reach it. Errors are logged, and returned joined.
func (c *Core) RunWorkers(ctx context.Context, all bool, logger *slog.Logger) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if all && c.Worker != nil {
		wg.Go(func() { errs <- c.Worker.Run(ctx) })
	}
	if c.Enricher != nil && (all || c.EnrichInProcess) {
		wg.Go(func() { errs <- c.Enricher.Run(ctx) })
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			logger.Error("capture worker stopped", "error", err)
			out = append(out, err)
		}
	}
	return errors.Join(out...)
}

// Open opens a memory core; an error wrapping ErrStoreDown is retried.
type Open func(ctx context.Context) (*Core, error)

// Options tune an Engine.
type Options struct {
	// Workers runs the capture worker in this process (capture.worker).
	Workers bool
	// Registerer receives each connected core's collectors (nil: none).
	Registerer prometheus.Registerer
	// FlushTimeout bounds how long Close waits for pending captures
	// (default 10s).
	FlushTimeout time.Duration
}

// Engine is the memory core the HTTP side calls. Its methods answer
// ErrNotConnected (Capture drops and counts) until a core is connected.
type Engine struct {
	cur  atomic.Pointer[Core]
	opts Options
	log  *slog.Logger
	up   atomic.Bool

	dropped prometheus.Counter
	storeUp prometheus.GaugeFunc

	stop    context.CancelFunc
	workers sync.WaitGroup
}

// New returns an engine with no core connected; Start or Use connects one.
func New(opts Options, logger *slog.Logger) *Engine {
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 10 * time.Second
	}
	e := &Engine{opts: opts, log: logger, stop: func() {}}
	e.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "memgate_capture_dropped_store_down_total",
		Help: "Exchanges not captured because the memory store was not connected yet.",
	})
	e.storeUp = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "memgate_store_up",
		Help: "1 when the memory store answered its last health check, else 0.",
	}, func() float64 {
		if e.up.Load() {
			return 1
		}
		return 0
	})
	return e
}

// Collectors are the engine's own Prometheus collectors.
func (e *Engine) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.dropped, e.storeUp}
}

// Use connects c at once, running no workers (the caller runs them, or
// none).
func (e *Engine) Use(c *Core) {
	e.cur.Store(c)
	e.up.Store(true)
}

// Connected reports whether a core is connected.
func (e *Engine) Connected() bool { return e.cur.Load() != nil }

// Start opens the core with open and connects it, running its workers
// until Close. When the store is down (ErrStoreDown) it returns nil and
// keeps retrying in the background, backing off from one second to 30; any
// other error is returned. It also pings the store every 15 seconds for
// memgate_store_up.
func (e *Engine) Start(ctx context.Context, open Open) error {
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.stop = stop
	switch c, err := open(ctx); {
	case err == nil:
		e.connect(bg, c)
	case errors.Is(err, ErrStoreDown):
		e.log.Warn("memory store unreachable: serving as a plain proxy (X-Memory-Degraded: store) and retrying in the background", "error", err)
		e.workers.Go(func() {
			if err := e.retry(bg, open); err != nil && !errors.Is(err, context.Canceled) {
				e.log.Error("memory stays off", "error", err)
			}
		})
	default:
		stop()
		return err
	}
	e.workers.Go(func() { e.watch(bg) })
	return nil
}

// connect registers c's collectors, runs its workers and switches memory on.
func (e *Engine) connect(ctx context.Context, c *Core) {
	if e.opts.Registerer != nil {
		for _, col := range c.AllCollectors() {
			if err := e.opts.Registerer.Register(col); err != nil {
				e.log.Warn("register memory metrics", "error", err)
			}
		}
	}
	e.workers.Go(func() { _ = c.RunWorkers(ctx, e.opts.Workers, e.log) })
	e.Use(c)
}

// retry calls open until it succeeds or ctx ends and connects the core. It
// gives up at once on an error that is not ErrStoreDown, returning it.
func (e *Engine) retry(ctx context.Context, open Open) error {
	delay := connectFirstRetry
	for attempt := 1; ; attempt++ {
		c, err := open(ctx)
		if err == nil {
			e.connect(ctx, c)
			e.log.Info("memory store connected: memory is on")
			return nil
		}
		if !errors.Is(err, ErrStoreDown) {
			return err
		}
		e.log.Debug("memory store unreachable", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, connectMaxRetry)
	}
}

// watch pings the store every storePingEvery until ctx ends.
func (e *Engine) watch(ctx context.Context) {
	pace.Every(ctx, storePingEvery, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_ = e.Ping(pctx)
		return true
	})
}

// Close flushes pending captures (within Options.FlushTimeout, past ctx's
// end too), stops the workers and the retries, and closes the core. It
// logs what failed, and returns it.
func (e *Engine) Close(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.FlushTimeout)
	defer cancel()
	defer func() {
		if err != nil {
			e.log.Error("close memory", "error", err)
		}
	}()
	var errs []error
	if c := e.cur.Load(); c != nil && c.Capturer != nil {
		if err := c.Capturer.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flush captures: %w", err))
		}
	}
	e.stop()
	e.workers.Wait()
	if c := e.cur.Load(); c != nil && c.Close != nil {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Ping checks the store (ErrNotConnected before it was reached) and keeps
// memgate_store_up current.
func (e *Engine) Ping(ctx context.Context) error {
	c := e.cur.Load()
	if c == nil {
		e.up.Store(false)
		return ErrNotConnected
	}
	err := c.Store.Ping(ctx)
	e.up.Store(err == nil)
	return err
}
