package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
)

// errStoreDown marks an openMemory failure to reach the store (as opposed
// to a configuration error): serve then starts as a plain proxy and keeps
// retrying.
var errStoreDown = errors.New("memory store unreachable")

// errNotConnected is what memory answers while the store is not connected.
var errNotConnected = fmt.Errorf("memory store not connected: %w", memory.ErrUnavailable)

// prepareTimeout bounds one request's whole memory preparation in the
// proxy: the Assembler drops late parts on its own (memory.load_timeout for
// the stored parts, memory.embedding_timeout for the query embedding, then
// load_timeout for recall's store queries); this only stops a preparation
// that hangs as a whole.
func prepareTimeout(cfg config.Config) time.Duration {
	return 2*cfg.Memory.LoadTimeout.D() + cfg.Memory.EmbeddingTimeout.D() + 100*time.Millisecond
}

// Retry pacing of the store connection when it is down at start-up.
const (
	connectFirstRetry = time.Second
	connectMaxRetry   = 30 * time.Second
	// storePingEvery refreshes memgate_store_up.
	storePingEvery = 15 * time.Second
)

// lateMemory is the memory the HTTP side uses in serve: until the store is
// reached it answers as a memory that is down — chat goes upstream as a
// plain proxy marked X-Memory-Degraded: store, captures are dropped and
// counted, the management API answers 503 — and from then on it is the
// opened memoryLayer. It implements proxy.Preparer, proxy.Capturer,
// admin.Store and admin.Recall.
type lateMemory struct {
	cur    atomic.Pointer[memoryLayer]
	log    *slog.Logger
	up     atomic.Bool
	recall bool // recall.enabled

	dropped prometheus.Counter
	storeUp prometheus.GaugeFunc
}

func newLateMemory(cfg config.Config, logger *slog.Logger) *lateMemory {
	l := &lateMemory{log: logger, recall: cfg.Recall.Enabled}
	l.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "memgate_capture_dropped_store_down_total",
		Help: "Exchanges not captured because the memory store was not connected yet.",
	})
	l.storeUp = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "memgate_store_up",
		Help: "1 when the memory store answered its last health check, else 0.",
	}, func() float64 {
		if l.up.Load() {
			return 1
		}
		return 0
	})
	return l
}

// collectors are lateMemory's own Prometheus collectors.
func (l *lateMemory) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.dropped, l.storeUp}
}

// httpDeps returns the HTTP side's collaborators, all served through l.
func (l *lateMemory) httpDeps(cfg config.Config, resolver httpDeps) httpDeps {
	d := resolver
	d.Preparer, d.Capturer, d.Admin, d.Importer, d.Erasures = l, l, l, l, l
	if l.recall {
		d.Recall = l
	}
	d.Ready = nil // chat is served with or without the store
	d.Collectors = append(d.Collectors, l.collectors()...)
	return d
}

// set switches memory on.
func (l *lateMemory) set(m *memoryLayer) {
	l.cur.Store(m)
	l.up.Store(true)
}

// Ping checks the store: errNotConnected before it was reached. It keeps
// memgate_store_up current.
func (l *lateMemory) Ping(ctx context.Context) error {
	m := l.cur.Load()
	if m == nil {
		l.up.Store(false)
		return errNotConnected
	}
	err := m.store.Ping(ctx)
	l.up.Store(err == nil)
	return err
}

// watch pings the store every storePingEvery until ctx ends.
func (l *lateMemory) watch(ctx context.Context) {
	t := time.NewTicker(storePingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			l.Ping(pctx)
			cancel()
		}
	}
}

// connect calls open until it succeeds or ctx ends, backing off from
// connectFirstRetry to connectMaxRetry, and hands the opened memory to
// ready. It gives up at once on an error that is not errStoreDown (a
// configuration error), returning it.
func connect(ctx context.Context, open func(context.Context) (*memoryLayer, error), ready func(*memoryLayer), logger *slog.Logger) error {
	delay := connectFirstRetry
	for attempt := 1; ; attempt++ {
		m, err := open(ctx)
		if err == nil {
			ready(m)
			return nil
		}
		if !errors.Is(err, errStoreDown) {
			return err
		}
		logger.Debug("memory store unreachable", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, connectMaxRetry)
	}
}

// Prepare is the opened memory's, or errNotConnected.
func (l *lateMemory) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	m := l.cur.Load()
	if m == nil {
		return memory.Prepared{}, errNotConnected
	}
	return awaitingPreparer{inner: m.preparer, c: m.capturer}.Prepare(ctx, req)
}

// Capture hands ex to the opened memory's capturer, or drops and counts it.
func (l *lateMemory) Capture(ctx context.Context, ex memory.Exchange) {
	m := l.cur.Load()
	if m == nil {
		l.dropped.Inc()
		return
	}
	m.capturer.Capture(ctx, ex)
}

// store returns the opened store, or errNotConnected.
func (l *lateMemory) store() (admin.Store, error) {
	m := l.cur.Load()
	if m == nil {
		return nil, errNotConnected
	}
	return m.store, nil
}

// recallManager returns the opened recall manager, or errNotConnected.
func (l *lateMemory) recallManager() (*recall.Manager, error) {
	m := l.cur.Load()
	if m == nil || m.recall == nil {
		return nil, errNotConnected
	}
	return m.recall.manager, nil
}

// Conversations implements admin.Store.
func (l *lateMemory) Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error) {
	s, err := l.store()
	if err != nil {
		return nil, err
	}
	return s.Conversations(ctx, tenant, user)
}

// Conversation implements admin.Store.
func (l *lateMemory) Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error) {
	s, err := l.store()
	if err != nil {
		return memory.Conversation{}, nil, err
	}
	return s.Conversation(ctx, id)
}

// DeleteConversation implements admin.Store.
func (l *lateMemory) DeleteConversation(ctx context.Context, id memory.Identity) error {
	s, err := l.store()
	if err != nil {
		return err
	}
	return s.DeleteConversation(ctx, id)
}

// DeleteUser implements admin.Store.
func (l *lateMemory) DeleteUser(ctx context.Context, tenant, user string) error {
	s, err := l.store()
	if err != nil {
		return err
	}
	return s.DeleteUser(ctx, tenant, user)
}

// Facts implements admin.Recall.
func (l *lateMemory) Facts(ctx context.Context, tenant, user string, history bool) ([]memory.Fact, error) {
	r, err := l.recallManager()
	if err != nil {
		return nil, err
	}
	return r.Facts(ctx, tenant, user, history)
}

// AddFact implements admin.Recall.
func (l *lateMemory) AddFact(ctx context.Context, f memory.Fact) (memory.Fact, error) {
	r, err := l.recallManager()
	if err != nil {
		return memory.Fact{}, err
	}
	return r.AddFact(ctx, f)
}

// DeleteFact implements admin.Recall.
func (l *lateMemory) DeleteFact(ctx context.Context, tenant, user string, id int64) error {
	r, err := l.recallManager()
	if err != nil {
		return err
	}
	return r.DeleteFact(ctx, tenant, user, id)
}

// Search implements admin.Recall.
func (l *lateMemory) Search(ctx context.Context, tenant, user, query string, topK int) ([]memory.Item, error) {
	r, err := l.recallManager()
	if err != nil {
		return nil, err
	}
	return r.Search(ctx, tenant, user, query, topK)
}

// SearchIn implements mcpserver.Recall.
func (l *lateMemory) SearchIn(ctx context.Context, tenant, user, conversation, query string, topK int) ([]memory.Item, error) {
	r, err := l.recallManager()
	if err != nil {
		return nil, err
	}
	return r.SearchIn(ctx, tenant, user, conversation, query, topK)
}

// allCollectors are the opened memory layer's Prometheus collectors.
func (m *memoryLayer) allCollectors() []prometheus.Collector {
	cs := append([]prometheus.Collector{}, m.collectors...)
	cs = append(cs, m.preparer.Collectors()...)
	cs = append(cs, m.capturer.Collectors()...)
	if m.worker != nil {
		cs = append(cs, m.worker.Collectors()...)
	}
	if m.enricher != nil {
		cs = append(cs, m.enricher.Collectors()...)
	}
	if m.recall != nil {
		cs = append(cs, m.recall.collectors...)
	}
	return cs
}
