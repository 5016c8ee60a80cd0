package record

import (
	"context"
	"time"

	"github.com/memgate/memgate/internal/pace"
)

// ConsumerPruner removes a queue's consumers that hold no entry and have
// not read for at least idle, reporting how many (redis.Queue: each
// process run joins the consumer groups under a name of its own,
// ProcessConsumer, so the names of stopped runs pile up).
type ConsumerPruner interface {
	PruneConsumers(ctx context.Context, idle time.Duration) (int, error)
}

// Consumers idle for consumerIdle are removed, every pruneEvery, as the
// Worker starts and then while it runs.
const (
	consumerIdle = time.Hour
	pruneEvery   = 10 * time.Minute
)

// prune removes the idle consumers of WorkerOptions.Prune's queues until
// ctx ends, now and every pruneEvery. A failure is counted and logged;
// the next round tries again.
func (w *Worker) prune(ctx context.Context) {
	for {
		for _, p := range w.opts.Prune {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := p.PruneConsumers(pctx, consumerIdle)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				w.failures.WithLabelValues("prune").Inc()
				w.logger.Warn("capture worker cannot remove idle queue consumers", "err", err)
			case n > 0:
				w.logger.Info("capture worker removed idle queue consumers", "consumers", n, "idle", consumerIdle)
			}
		}
		if !pace.Sleep(ctx, pruneEvery) {
			return
		}
	}
}
