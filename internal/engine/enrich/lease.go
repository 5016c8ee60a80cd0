package enrich

import (
	"context"
	"time"

	"github.com/memgate/memgate/internal/pace"
)

// lease takes or renews the enricher's lease (EnrichOptions.Lease); without
// one every enricher may drain the queue (held is true).
func (e *Enricher) lease(ctx context.Context) (held, taken bool, err error) {
	if e.opts.Lease == nil {
		return true, false, nil
	}
	return e.opts.Lease.Lease(ctx, e.opts.Consumer, e.leaseTTL)
}

// keepLease renews the lease every third of its TTL until the returned
// function is called, so that a round that runs longer than the TTL (a
// slow side model) keeps it: another enricher taking it over would claim
// the round's entries at once and enrich them again. Renewal survives a
// cancelled ctx, as the round does.
func (e *Enricher) keepLease(ctx context.Context) (stop func()) {
	if e.opts.Lease == nil {
		return func() {}
	}
	return pace.Keep(context.WithoutCancel(ctx), e.leaseTTL/3, func(ctx context.Context) (bool, error) {
		held, _, err := e.lease(ctx)
		return held, err
	}, func(err error) {
		e.logger.Warn("enricher cannot renew its lease", "err", err)
	}, func() {
		e.logger.Warn("enricher lost its lease during a round; another enricher may enrich its exchanges again")
	})
}

// release gives up the enricher's lease, if it holds it, so that the next
// enricher takes over at once instead of waiting for it to run out.
func (e *Enricher) release(ctx context.Context) {
	if e.opts.Lease == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := e.opts.Lease.Release(rctx, e.opts.Consumer); err != nil {
		e.logger.Warn("enricher cannot give up its lease; the next enricher waits for it to run out", "err", err)
	}
}
