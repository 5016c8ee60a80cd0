package record

import (
	"context"
	"sync"
	"testing"
	"time"
)

// recordingPruner records the idle bound of each PruneConsumers call.
type recordingPruner struct {
	mu    sync.Mutex
	idles []time.Duration
}

func (p *recordingPruner) PruneConsumers(_ context.Context, idle time.Duration) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idles = append(p.idles, idle)
	return 0, nil
}

func (p *recordingPruner) calls() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.idles...)
}

// TestWorkerPrunesIdleConsumers: a starting worker has its queues remove
// the consumers idle for an hour (those of stopped process runs).
func TestWorkerPrunesIdleConsumers(t *testing.T) {
	capture, enrich := &recordingPruner{}, &recordingPruner{}
	opts := fastWorker()
	opts.Prune = []ConsumerPruner{capture, enrich}
	mustRunWorker(t, NewWorker(newFakeQueue(), newGateSaver(), nil, opts))
	for name, p := range map[string]*recordingPruner{"capture": capture, "enrich": enrich} {
		waitFor(t, name+" queue pruned", func() bool { return len(p.calls()) > 0 })
		if got := p.calls()[0]; got != consumerIdle {
			t.Errorf("%s queue pruned of consumers idle for %v, want %v", name, got, consumerIdle)
		}
	}
}
