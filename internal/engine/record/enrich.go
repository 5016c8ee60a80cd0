package record

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// enrichment is an entry of the enrichment queue: a stored exchange and
// what storing it changed.
type enrichment struct {
	Exchange memory.Exchange   `json:"exchange"`
	Result   memory.SaveResult `json:"result"`
	// CapturedAt is when the exchange was handed to the Capturer (zero when
	// unknown: the enrichment lag then runs from the exchange's At). An
	// imported or dated exchange's At is when it was said, long before.
	CapturedAt time.Time `json:"captured_at,omitzero"`
}

// EncodeEnrichment encodes a stored exchange for the enrichment queue. Of
// the client's resent history (Prior) it keeps only the messages the save
// stored (the hooks index exactly those), so an entry stays small however
// much history the client sends.
func EncodeEnrichment(ex memory.Exchange, res memory.SaveResult) ([]byte, error) {
	return encodeEnrichment(ex, res, time.Time{})
}

// encodeEnrichment is EncodeEnrichment for an exchange captured at
// capturedAt (zero: unknown).
func encodeEnrichment(ex memory.Exchange, res memory.SaveResult, capturedAt time.Time) ([]byte, error) {
	keep := min(len(ex.Prior), max(0, res.Inserted-len(ex.Turn)-1))
	ex.Prior = ex.Prior[len(ex.Prior)-keep:]
	b, err := json.Marshal(enrichment{Exchange: ex, Result: res, CapturedAt: capturedAt})
	if err != nil {
		return nil, fmt.Errorf("encode enrichment: %w", err)
	}
	return b, nil
}

// EnrichOptions tunes an Enricher. Zero fields take the defaults noted.
type EnrichOptions struct {
	// Consumer names this enricher in the queue (default host-pid-enrich).
	Consumer string
	// Batch is the most entries one round takes (default 256). The longer
	// the backlog, the fuller the rounds, and the hooks handle each round's
	// exchanges together, per conversation: the backlog costs less per turn
	// the longer it gets.
	Batch int
	// StaleAfter is when another consumer's unacknowledged entries are
	// reclaimed (default 30s).
	StaleAfter time.Duration
	// Block is how long one Claim waits for new entries (default 2s).
	Block time.Duration
	// Attempts is how many times a round's hooks are run when they fail
	// before its entries are acknowledged anyway (default 3).
	Attempts int
	// BackoffBase and BackoffMax bound the wait between attempts and after a
	// failed Claim (defaults 100ms and 10s).
	BackoffBase, BackoffMax time.Duration
	// Interval is the least time between the starts of two rounds (default
	// 250ms): under steady load a round gathers the turns of that stretch,
	// and each conversation's are handled once, together.
	Interval time.Duration
	// Tracer, when set, makes each round a "memory.enrich" span linked to
	// the traced requests whose exchanges it enriches.
	Tracer trace.TracerProvider
	// Share is the most of the wall time the rounds may take (default 0.5):
	// after a round that took d, the next starts no sooner than d/Share
	// after it began. Enrichment that falls behind gets fuller rounds, never
	// more of the machine than its share, so the requests and the saves it
	// shares the CPUs and the store with never wait for it.
	Share float64
}

func (o EnrichOptions) withDefaults() EnrichOptions {
	if o.Consumer == "" {
		host, _ := os.Hostname()
		o.Consumer = fmt.Sprintf("%s-%d-enrich", host, os.Getpid())
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 30 * time.Second
	}
	if o.Block <= 0 {
		o.Block = 2 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 100 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffBase {
		o.BackoffMax = max(10*time.Second, o.BackoffBase)
	}
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.Share <= 0 || o.Share > 1 {
		o.Share = 0.5
	}
	return o
}

// Enricher drains the enrichment queue: it runs the after-save hooks (fact
// extraction, compaction, indexing) over stored exchanges, off the path of
// every request and of every save. Each round takes whatever is queued (up
// to Batch), orders it by conversation (each conversation's turns kept in
// order) and runs every hook once over all of it, so a BatchHook compacts a
// conversation once and embeds in one call however many turns it got
// meanwhile. Rounds are spaced (EnrichOptions.Interval, Share), so that
// enrichment takes a bounded part of the machine whatever its backlog. Its
// lag — capture to enriched — is measured.
type Enricher struct {
	queue  Queue
	hooks  []Hook
	logger *slog.Logger
	opts   EnrichOptions

	enriched, coalesced, poison prometheus.Counter
	failures                    *prometheus.CounterVec
	lag                         prometheus.Histogram
	backlog                     prometheus.Collector
}

// NewEnricher returns an Enricher of q running hooks; logger may be nil.
func NewEnricher(q Queue, hooks []Hook, logger *slog.Logger, opts EnrichOptions) *Enricher {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Enricher{
		queue:  q,
		hooks:  hooks,
		logger: logger,
		opts:   opts.withDefaults(),
		enriched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_enrich_exchanges_total",
			Help: "Stored exchanges whose after-save hooks ran (or were given up).",
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_enrich_coalesced_total",
			Help: "Exchanges enriched together with an earlier one of the same conversation in one round.",
		}),
		poison: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_enrich_poison_total",
			Help: "Enrichment entries acknowledged without running hooks: undecodable.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_enrich_failures_total",
			Help: "Enrichment failures by stage (claim, hook, gave_up, ack).",
		}, []string{"stage"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_enrich_lag_seconds",
			Help:    "Time from an exchange's capture to the end of its after-save hooks.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
	}
	if p, ok := q.(interface {
		Pending(ctx context.Context) (int64, error)
	}); ok {
		e.backlog = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "memgate_enrich_backlog",
			Help: "Stored exchanges waiting for enrichment (queued or being enriched).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n, err := p.Pending(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		})
	}
	return e
}

// Collectors returns the Enricher's metrics for the caller to register.
func (e *Enricher) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{e.enriched, e.coalesced, e.poison, e.failures, e.lag}
	if e.backlog != nil {
		cs = append(cs, e.backlog)
	}
	return cs
}

// Run enriches until ctx is cancelled, then returns nil. A round whose hooks
// fail is run again after a backoff, up to Attempts times, then its entries
// are acknowledged anyway (counted as gave_up): enrichment is best effort
// and never holds up what comes after it for long.
func (e *Enricher) Run(ctx context.Context) error {
	// No client waits on enrichment: a store may let the writes clients
	// wait on go first. What the hooks write carries its erasure guard
	// (memory.Fact.GuardSince), which tells a store the write derives from
	// captured exchanges, and a store's enrichment queue knows its consumer
	// is this one.
	delay := e.opts.BackoffBase
	var next time.Time // the earliest start of the next round
	for ctx.Err() == nil {
		if wait := time.Until(next); wait > 0 && !sleep(ctx, wait) {
			return nil
		}
		ds, err := e.queue.Claim(ctx, e.opts.Consumer, e.opts.Batch, e.opts.StaleAfter, e.opts.Block)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			e.failures.WithLabelValues("claim").Inc()
			e.logger.Warn("enricher cannot claim", "err", err)
			if !sleep(ctx, delay) {
				return nil
			}
			delay = min(2*delay, e.opts.BackoffMax)
			continue
		}
		delay = e.opts.BackoffBase
		if len(ds) > 0 {
			start := time.Now()
			e.round(ctx, ds)
			next = start.Add(max(e.opts.Interval, time.Duration(float64(time.Since(start))/e.opts.Share)))
		}
	}
	return nil
}

// round runs the hooks over one claimed batch and acknowledges it.
func (e *Enricher) round(ctx context.Context, ds []memory.Delivery) {
	acks := make([]string, 0, len(ds))
	var batch []enrichment
	for _, d := range ds {
		acks = append(acks, d.ID)
		var en enrichment
		if err := json.Unmarshal(d.Payload, &en); err != nil || en.Exchange.ID == "" {
			e.poison.Inc()
			e.logger.Error("enricher discards an undecodable entry", "entry", d.ID, "bytes", len(d.Payload), "err", err)
			continue
		}
		batch = append(batch, en)
	}
	// Each conversation's turns together, in the order they were stored.
	slices.SortStableFunc(batch, func(a, b enrichment) int {
		x, y := a.Exchange.Identity, b.Exchange.Identity
		return cmp.Or(cmp.Compare(x.Tenant, y.Tenant), cmp.Compare(x.User, y.User), cmp.Compare(x.Conversation, y.Conversation))
	})
	exs := make([]memory.Exchange, len(batch))
	results := make([]memory.SaveResult, len(batch))
	starts := make([]time.Time, len(batch))
	for i, en := range batch {
		exs[i], results[i] = en.Exchange, en.Result
		starts[i] = en.CapturedAt
		if starts[i].IsZero() {
			starts[i] = en.Exchange.At
		}
		if i > 0 && exs[i-1].Identity == en.Exchange.Identity {
			e.coalesced.Inc()
		}
	}
	// The hooks' work survives a cancelled ctx for a bounded time, so that
	// a stopping worker finishes the round it started.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	hctx, span := telemetry.StartLinked(hctx, e.opts.Tracer, "memory.enrich", traceParents(exs), attribute.Int("memgate.exchanges", len(exs)))
	defer span.End()
	delay := e.opts.BackoffBase
	for attempt := 1; len(exs) > 0; attempt++ {
		err := runHooks(hctx, e.hooks, exs, results)
		if err == nil {
			break
		}
		e.failures.WithLabelValues("hook").Inc()
		if attempt >= e.opts.Attempts || ctx.Err() != nil {
			e.failures.WithLabelValues("gave_up").Inc()
			e.logger.Error("enricher gives up on a round; the exchanges stay stored", "exchanges", len(exs), "attempts", attempt, "err", err)
			break
		}
		e.logger.Warn("enricher hooks failed; retrying", "exchanges", len(exs), "attempt", attempt, "err", err)
		if !sleep(hctx, delay) {
			break
		}
		delay = min(2*delay, e.opts.BackoffMax)
	}
	now := time.Now()
	for _, start := range starts {
		if !start.IsZero() {
			e.lag.Observe(now.Sub(start).Seconds())
		}
	}
	e.enriched.Add(float64(len(exs)))
	actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer acancel()
	if err := e.queue.Ack(actx, acks...); err != nil {
		e.failures.WithLabelValues("ack").Inc()
		e.logger.Warn("enricher cannot acknowledge; entries will be redelivered", "entries", len(acks), "err", err)
	}
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// coalesced is a BatchHook that hands its hook one exchange per
// conversation per round.
type coalesced struct{ h Hook }

// CoalesceTurns wraps a hook that does per-exchange work worth doing once
// over several turns (fact extraction: one model call over all the new user
// messages): in a batch, the new exchanges of each conversation are merged
// into one, in order — their turns concatenated, the newest reply, id and
// time — and the hook runs once per conversation. Duplicates and dropped
// exchanges are left out, as fact extraction skips them.
func CoalesceTurns(h Hook) BatchHook { return coalesced{h} }

// AfterSave runs the hook.
func (c coalesced) AfterSave(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error {
	return c.h.AfterSave(ctx, ex, res)
}

// AfterSaveBatch merges the batch per conversation and runs the hook over
// the merged exchanges (in one call when it is a BatchHook).
func (c coalesced) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	var (
		merged []memory.Exchange
		res    []memory.SaveResult
		at     = map[memory.Identity]int{}
	)
	for i, ex := range exs {
		if results[i].Duplicate || results[i].Dropped {
			continue
		}
		k, ok := at[ex.Identity]
		if !ok {
			at[ex.Identity] = len(merged)
			ex.Turn = slices.Clone(ex.Turn)
			merged, res = append(merged, ex), append(res, results[i])
			continue
		}
		m := &merged[k]
		m.Turn = append(m.Turn, ex.Turn...)
		m.ID, m.RequestID, m.Reply, m.At, m.Model, m.Usage = ex.ID, ex.RequestID, ex.Reply, ex.At, ex.Model, ex.Usage
		m.Prior = nil
		res[k].Inserted += results[i].Inserted
		res[k].Superseded += results[i].Superseded
		if g := results[i].GuardSince; res[k].GuardSince.IsZero() || !g.IsZero() && g.Before(res[k].GuardSince) {
			res[k].GuardSince = g // the earliest: what derives from the merged exchange derives from each
		}
	}
	if len(merged) == 0 {
		return nil
	}
	if bh, ok := c.h.(BatchHook); ok {
		return bh.AfterSaveBatch(ctx, merged, res)
	}
	for i, ex := range merged {
		if err := c.h.AfterSave(ctx, ex, res[i]); err != nil {
			return err
		}
	}
	return nil
}

// traceParents are the traceparents the exchanges carry from the requests
// that caused them.
func traceParents(exs []memory.Exchange) []string {
	var out []string
	for _, ex := range exs {
		if ex.TraceParent != "" {
			out = append(out, ex.TraceParent)
		}
	}
	return out
}
