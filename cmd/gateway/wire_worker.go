package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/proxy"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// openEnrichQueue returns the queue stored exchanges wait in for their
// after-save hooks: the SQLite enrichment outbox, a Redis stream next to
// the capture stream, or, with PostgreSQL and no Redis (or Redis down at
// start-up), a queue in this process's memory. durable is false for the
// last.
func openEnrichQueue(ctx context.Context, cfg config.Config, st store, captureQueue record.Queue) (q record.Queue, durable bool, err error) {
	if s, ok := st.(*sqlite.Store); ok {
		return s.EnrichOutbox(), true, nil
	}
	if rq, ok := captureQueue.(*redis.Queue); ok {
		eq, err := rq.Sibling(ctx, "enrich")
		if err != nil {
			return nil, false, fmt.Errorf("enrichment queue: %w", err)
		}
		return eq, true, nil
	}
	return record.NewMemoryQueue(0), false, nil
}

// wireCapture builds the capture pipeline over st: the Capturer, which
// stores each exchange on the request path (falling back to the capture
// queue q when the store fails); the Worker, which stores what waits in q;
// and the Enricher, which runs the after-save hooks from the enrichment
// queue, off every request and every save.
func (m *memoryLayer) wireCapture(ctx context.Context, cfg config.Config, q record.Queue, red record.Redactor, logger *slog.Logger) error {
	eq, durable, err := openEnrichQueue(ctx, cfg, m.store, q)
	if err != nil {
		return err
	}
	m.enrichInProcess = !durable
	m.capturer = record.New(q, m.store, red, logger, record.Options{Enrich: eq})
	if q != nil {
		m.worker = record.NewWorker(q, m.store, logger, record.WorkerOptions{
			StaleAfter: cfg.Capture.ReclaimAfter.D(), Enrich: eq,
		})
	}
	// The enrichment rounds' spans come from the process's global tracer
	// provider, which delegates to the one serve or worker sets when
	// tracing is on, whenever that happens (a no-op one otherwise).
	m.enricher = record.NewEnricher(eq, m.hooks, logger, record.EnrichOptions{StaleAfter: cfg.Capture.ReclaimAfter.D(), Tracer: otel.GetTracerProvider()})
	return nil
}

// runWorkers runs the capture queue's worker and the enricher until ctx
// ends. With all false (record.worker off: separate worker processes do
// it) only an in-process enrichment queue is drained here, since no other
// process can reach it.
func (m *memoryLayer) runWorkers(ctx context.Context, all bool, logger *slog.Logger) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if all && m.worker != nil {
		wg.Go(func() { errs <- m.worker.Run(ctx) })
	}
	if m.enricher != nil && (all || m.enrichInProcess) {
		wg.Go(func() { errs <- m.enricher.Run(ctx) })
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

// awaitingPreparer makes a request wait, briefly, for its conversation's
// previous turn to be stored before the memory is read: a user who sent a
// turn a moment after the last answer finds it in the prompt.
type awaitingPreparer struct {
	inner proxy.Preparer
	c     *record.Capturer
}

// Prepare waits for the conversation's pending capture for at most half of
// what is left of ctx's deadline (100ms without one), then prepares.
func (p awaitingPreparer) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	wait := 100 * time.Millisecond
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl) / 2
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	_ = p.c.Wait(wctx, req.Identity) // past the wait, the prompt goes without it
	cancel()
	return p.inner.Prepare(ctx, req)
}
