package enrich

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/telemetry"
)

// EnrichOptions tunes an Enricher. Zero fields take the defaults noted.
type EnrichOptions struct {
	// Consumer names this enricher in the queue and its lease (default
	// record.ProcessConsumer's name, -enrich: the process run's own).
	Consumer string
	// Batch is the most entries one round takes (default 256). The longer
	// the backlog, the fuller the rounds, and the hooks handle each round's
	// exchanges together, per conversation: the backlog costs less per turn
	// the longer it gets.
	Batch int
	// StaleAfter is when another consumer's unacknowledged entries are
	// reclaimed (default 30s). With a side lane (Side), an entry held
	// for half of it before its side round starts is let go instead,
	// unacknowledged, for redelivery (memgate_enrich_side_released_total):
	// another process may have reclaimed it and run its side hooks.
	StaleAfter time.Duration
	// Block is how long one Claim waits for new entries (default 2s).
	Block time.Duration
	// Attempts is how many times a hook is run over a round's part when
	// it fails, before the part is acknowledged anyway (default 3). Only
	// the hooks that failed are run again, and a hook that ran out its
	// HookTimeout is not: it had its time.
	Attempts int
	// HookTimeout bounds one run of one hook over a part of a round
	// (default 30s), and the hooks' work on a round once Run's ctx is
	// cancelled. Each hook has its own: a hook that hangs (a side model
	// that does not answer) never cuts off the hooks after it.
	HookTimeout time.Duration
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
	// Idle, when set, is low-priority work done while nothing waits to be
	// enriched (the indexer's Backfill): called after a claim finds the
	// queue empty, and again while it reports work done, for at most a
	// quarter of Block before the next claim, so a queued exchange waits
	// for it no longer than that; while work is left, the next claim waits
	// only as long as the work ran, so it takes at most half of the idle
	// time. It returns how much it did (0: nothing left).
	Idle func(ctx context.Context) (int, error)
	// Lease, when set, lets one enricher at a time drain the queue
	// (sqlite.Outbox grants leases, per queue: the enrichment outbox's is
	// not the capture outbox's); nil: every enricher drains it. Processes
	// sharing one SQLite file must: two of them draining it at once split
	// a conversation's turns between concurrent rounds, each compacting
	// it from the same state (the side model paid for a summary version
	// twice, one thrown away), and a round that outlasts StaleAfter is
	// taken over and enriched again (its side-model calls paid twice; what
	// the hooks write is the same, see Run).
	Lease record.Leaser
	// Conversations, when set, lets one enricher at a time enrich each
	// conversation, across processes, while several drain the queue at
	// once (redis.Leases: many gateways and workers sharing the Redis
	// enrichment stream). A round leases the conversations of what it
	// claimed, enriches those it holds, a few conversations at a time,
	// each part acknowledged and released when done, and keeps the rest
	// for its next rounds; it renews the leases while its hooks run, and
	// its hooks stop writing before a lease it failed to renew can run
	// out (see fence), leaving what they did not finish unacknowledged,
	// to be enriched again by the conversation's next holder.
	// nil: every enricher enriches whatever it claims. Without it, two
	// enrichers compact one conversation from the same state (the side
	// model paid for a summary version twice, one thrown away), and a
	// round that outlasts StaleAfter is reclaimed and enriched again (its
	// side-model calls paid twice).
	Conversations ConversationLeases
	// Side, when set, are the after-save hooks that call a side model
	// (compaction, fact extraction), followed by the indexing of what
	// they write (recall.Indexer.Derived): they run in their own lane
	// (side.go), so that a side model that hangs or crawls never holds up
	// the hooks NewEnricher was given (the index lane: indexing a turn's
	// messages, recall.Indexer.Messages). Each entry runs through both,
	// the index lane first, and is acknowledged only when both are done
	// with it (or gave it up): what a stop or a crash leaves is
	// redelivered. nil: one lane runs every hook, in order.
	Side []record.Hook
	// SidePending bounds the entries indexed and waiting for the side
	// lane, held in memory with their exchanges (default 4×Batch). The
	// index lane leaves what finds it full claimed and unacknowledged
	// (memgate_enrich_side_shed_total): redelivered after StaleAfter, it
	// is offered to the side lane again, not indexed again by this
	// process. What waits in it past half of StaleAfter is let go the
	// same way when its turn comes (see releaseStale).
	SidePending int
	// Erased, when set, reports when a user was last erased (the store's
	// ErasedAt; zero: never). The side lane asks before each round, and
	// leaves out, acknowledged, the entries of users erased since their
	// exchange: their text, which waited in memory while the erasure
	// purged the queue, never reaches a side model.
	Erased func(ctx context.Context, tenant, user string) (time.Time, error)
}

func (o EnrichOptions) withDefaults() EnrichOptions {
	if o.Consumer == "" {
		o.Consumer = record.ProcessConsumer() + "-enrich"
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
	if o.HookTimeout <= 0 {
		o.HookTimeout = 30 * time.Second
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
	if o.SidePending <= 0 {
		o.SidePending = 4 * o.Batch
	}
	return o
}

// Enricher drains the enrichment queue: it runs the after-save hooks (fact
// extraction, compaction, indexing) over stored exchanges, off the path of
// every request and of every save. Each round takes whatever is queued (up
// to Batch), orders it by conversation (each conversation's turns kept in
// order) and runs every hook once over all of it, so a hook compacts a
// conversation once and embeds in one call however many turns it got
// meanwhile. Rounds are spaced (EnrichOptions.Interval, Share), so that
// enrichment takes a bounded part of the machine whatever its backlog. Its
// lag — capture to enriched — is measured.
type Enricher struct {
	queue  record.Queue
	hooks  []record.Hook
	logger *slog.Logger
	opts   EnrichOptions

	enriched, coalesced, poison prometheus.Counter
	failures                    *prometheus.CounterVec
	lag                         prometheus.Histogram
	backlog                     prometheus.Collector
	// indexLag, sidePending, shed and released are the side lane's
	// (side.go).
	indexLag       prometheus.Histogram
	sidePending    prometheus.Collector
	shed, released prometheus.Counter

	// side is the side lane; nil without EnrichOptions.Side.
	side *sideLane

	// clock tells when an entry was first held (claimed.since) and how
	// long it has been held since (time.Now; a test's clock).
	clock func() time.Time
	// leaseTTL is how long a lease lasts without renewal (see lease).
	leaseTTL time.Duration
	// holder names this enricher in the conversation leases (holderToken).
	holder string
	// deferred are claimed entries of conversations another enricher
	// held, kept for the next round (admit), at most Batch of them: Run
	// claims no more than the room they leave; Run's goroutine only (the
	// side lane's, with EnrichOptions.Side).
	deferred []claimed
	// claimEpoch is cache.Epoch taken before Run's last Claim, for the
	// entries it claimed (claimed.epoch); claimRead is false before the
	// first. Run's goroutine only.
	claimEpoch uint64
	claimRead  bool
}

// NewEnricher returns an Enricher of q running hooks; logger may be nil.
func NewEnricher(q record.Queue, hooks []record.Hook, logger *slog.Logger, opts EnrichOptions) *Enricher {
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
			Help: "Enrichment failures by stage (claim, hook, gave_up, ack, idle, lease, lease_lost, erased).",
		}, []string{"stage"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_enrich_lag_seconds",
			Help:    "Time from an exchange's capture to the end of its after-save hooks.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
	}
	e.indexLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "memgate_enrich_index_lag_seconds",
		Help:    "Time from an exchange's capture to the end of its indexing (with a side lane; else see memgate_enrich_lag_seconds).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
	e.shed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "memgate_enrich_side_shed_total",
		Help: "Indexed exchanges the full side lane left unacknowledged, for redelivery.",
	})
	e.released = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "memgate_enrich_side_released_total",
		Help: "Indexed exchanges the side lane let go unacknowledged, for redelivery, having held them past half of the reclaim time: another process may have reclaimed them.",
	})
	if len(e.opts.Side) > 0 {
		e.side = newSideLane(e.opts.SidePending, 4*e.opts.SidePending)
	}
	e.sidePending = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "memgate_enrich_side_pending",
		Help: "Indexed exchanges this process holds for its side lane (side-model hooks): waiting or in a round.",
	}, func() float64 { return float64(e.side.pending()) })
	e.clock = time.Now
	e.leaseTTL = max(4*e.opts.Block, 5*time.Second)
	e.holder = holderToken(e.opts.Consumer)
	e.backlog = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "memgate_enrich_backlog",
		Help: "Stored exchanges waiting for enrichment (queued or being enriched).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n, err := q.Pending(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	})
	return e
}

// Collectors returns the Enricher's metrics for the caller to register.
func (e *Enricher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.enriched, e.coalesced, e.poison, e.failures, e.lag, e.backlog, e.indexLag, e.sidePending, e.shed, e.released}
}

// Run enriches until ctx is cancelled, then returns nil. Each hook runs
// under its own deadline (HookTimeout); a hook that fails is run again
// after a backoff, up to Attempts times, without the hooks that succeeded,
// then the round's entries are acknowledged anyway (counted as gave_up):
// enrichment is best effort, a failing side model (the compactor's) never
// holds up indexing or fact extraction, and nothing holds up what comes
// after it for long. With EnrichOptions.Side, the side hooks run in their
// own lane, rounds of their own over what the index lane's rounds
// indexed (indexRound, runSide), so that not even a side model's
// deadlines hold up indexing; an entry is acknowledged once both lanes
// are done with it. Delivery is
// at-least-once — a round that cannot acknowledge is redelivered, whole or
// in part — and what the hooks write is idempotent by the exchange's
// stored messages: a fact stated again from its message counts no mention
// more (storetest.Knowledge), a summary version covering the messages is
// not asked for again, items are upserted by their source. The fact
// extraction model's answers are kept by the process that asked
// (recall.Extractor), so only a round another process redoes pays for
// them again. With a lease
// (EnrichOptions.Lease) it enriches only while it holds it, renewing it
// before each claim and during each round, and stands by, doing its idle
// work, while another enricher holds it; on the way out it gives the lease
// up, so that the next enricher takes over at once.
func (e *Enricher) Run(ctx context.Context) error {
	// No client waits on enrichment: a store may let the writes clients
	// wait on go first. What the hooks write carries its erasure guard
	// (memory.Fact.GuardSince), which tells a store the write derives from
	// captured exchanges, and a store's enrichment queue knows its consumer
	// is this one.
	defer e.release(ctx)
	if e.side != nil {
		// The side lane stops with Run: it finishes its round (within
		// the hooks' grace) and leaves what waits for it unacknowledged.
		done := make(chan struct{})
		go func() { defer close(done); e.runSide(ctx) }()
		defer func() { <-done }()
	}
	delay, block := e.opts.BackoffBase, e.opts.Block
	var next time.Time // the earliest start of the next round
	for ctx.Err() == nil {
		if wait := time.Until(next); wait > 0 && !pace.Sleep(ctx, wait) {
			return nil
		}
		held, taken, err := e.lease(ctx)
		if err == nil && !held {
			// Another enricher drains the queue; stand by. It reclaims
			// at once what this one claimed and did not acknowledge:
			// what waits for the side lane is its to enrich now.
			e.side.letGoWaiting()
			if e.opts.Idle != nil {
				e.idle(ctx)
			}
			if !pace.Sleep(ctx, e.opts.Block) {
				return nil
			}
			continue
		}
		// What is claimed and not acknowledged when the lease is taken was
		// left by an enricher that stopped: another one (whose entries
		// Claim serves at once), or this process's previous run under the
		// same name (a container's host and pid 1), reclaimed at once too.
		stale := e.opts.StaleAfter
		if taken {
			stale = 0
		}
		var ds []memory.Delivery
		// The entries kept for the next round (admit) count against
		// Batch: while they fill it, new entries stay in the queue, read
		// once the kept ones are enriched or let go. With a side lane,
		// that lane keeps them, and every claim may take a full Batch.
		kept := 0
		if e.side == nil {
			kept = len(e.deferred)
		}
		if room := e.opts.Batch - kept; err == nil && room > 0 {
			wait := block
			if kept > 0 {
				wait = min(wait, e.opts.Interval) // kept entries wait for the next round only
			}
			e.claimEpoch, e.claimRead = cache.Epoch(), true
			ds, err = e.queue.Claim(ctx, e.opts.Consumer, room, stale, wait)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			e.failures.WithLabelValues("claim").Inc()
			e.logger.Warn("enricher cannot claim", "err", err)
			if !pace.Sleep(ctx, delay) {
				return nil
			}
			delay = min(2*delay, e.opts.BackoffMax)
			continue
		}
		delay = e.opts.BackoffBase
		if block = e.opts.Block; len(ds) > 0 || kept > 0 {
			start := time.Now()
			var waited time.Duration
			if e.side != nil {
				waited = e.indexRound(ctx, ds)
			} else {
				waited = e.round(ctx, ds, e.takeDeferred())
			}
			next = start.Add(max(e.opts.Interval, time.Duration(float64(time.Since(start)-waited)/e.opts.Share)))
		} else if e.opts.Idle != nil {
			block = e.idle(ctx)
		}
	}
	return nil
}

// idle runs opts.Idle while it finds work, for at most a quarter of
// Block, and returns how long the next claim may wait: Block when the idle
// work is done or failed, else as long as it ran, so that it takes at most
// half of the time nothing is queued.
func (e *Enricher) idle(ctx context.Context) time.Duration {
	start := time.Now()
	for ctx.Err() == nil && time.Since(start) < e.opts.Block/4 {
		n, err := e.opts.Idle(ctx)
		if err != nil {
			e.failures.WithLabelValues("idle").Inc()
			e.logger.Warn("enricher's idle work failed", "err", err)
			return e.opts.Block
		}
		if n == 0 {
			return e.opts.Block
		}
	}
	return max(time.Since(start), time.Millisecond)
}

// round runs the hooks over one claimed batch, with the entries kept from
// earlier rounds (deferred, already decoded), and acknowledges them. With
// EnrichOptions.Conversations it enriches only the conversations it holds
// (admit), a few conversations at a time (chunks), fenced by their leases:
// each part is acknowledged and its conversations released as soon as it
// is done, so that another enricher holding their next turns goes on
// while this one does the rest. It returns how long it waited between a
// failed hook's attempts: that wait is not work the pacing (Share) counts.
func (e *Enricher) round(ctx context.Context, ds []memory.Delivery, deferred []claimed) (waited time.Duration) {
	return e.roundOf(ctx, ds, deferred, e.hooks)
}

// roundOf is round with hooks (the side lane's: EnrichOptions.Side).
func (e *Enricher) roundOf(ctx context.Context, ds []memory.Delivery, deferred []claimed, hooks []record.Hook) (waited time.Duration) {
	defer e.keepLease(ctx)()
	var acks []string
	now := e.clock()
	all := deferred
	for _, d := range ds {
		en, err := record.DecodeEnrichment(d.Payload)
		if err != nil {
			acks = append(acks, d.ID)
			e.poison.Inc()
			e.logger.Error("enricher discards an undecodable entry", "entry", d.ID, "bytes", len(d.Payload), "err", err)
			continue
		}
		all = append(all, claimed{d: d, en: en, since: now, key: conversationKey(en.Exchange.Identity), epoch: e.claimEpoch, read: e.claimRead})
	}
	var keys []string
	var at time.Time
	if e.opts.Conversations != nil {
		all, keys, at = e.admit(ctx, all)
	}
	if len(all) == 0 {
		e.ack(ctx, acks) // the undecodable entries
		return 0
	}
	e.markErased(ctx, all)
	byConversation(all)
	exs := make([]memory.Exchange, len(all))
	for i, c := range all {
		exs[i] = c.en.Exchange
		if i > 0 && exs[i-1].Identity == exs[i].Identity {
			e.coalesced.Inc()
		}
	}
	// The hooks' work survives a cancelled ctx for a bounded time, so that
	// a stopping worker finishes the round it started; until then each
	// hook's run is bounded on its own (runHook).
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(e.opts.HookTimeout, cancel) })()
	var f *fence
	if len(keys) > 0 {
		hctx, f = e.fence(hctx, keys, at)
	}
	hctx, span := telemetry.StartLinked(hctx, e.opts.Tracer, "memory.enrich", traceParents(exs), attribute.Int("memgate.exchanges", len(exs)))
	defer span.End()
	parts := chunks(all, e.opts.Conversations != nil)
	left := 0 // the exchanges the fence stopped
	for i, part := range parts {
		ok, w := false, time.Duration(0)
		if !fenced(hctx) {
			ok, w = e.runHooks(ctx, hctx, hooks, part)
			waited += w
		}
		if !ok {
			// Fenced: not acknowledged, so that they are redelivered, and
			// enriched again — the hooks' writes are idempotent — by the
			// enricher that holds their conversation then.
			left += len(part)
			continue
		}
		e.observe(e.lag, part)
		e.enriched.Add(float64(len(part)))
		for _, c := range part {
			acks = append(acks, c.d.ID)
		}
		if f != nil && i < len(parts)-1 {
			// Acknowledged before released: another enricher that
			// takes the conversation then never reclaims these entries.
			e.ack(ctx, acks)
			acks = nil
			f.release(ctx, partKeys(part))
		}
	}
	e.ack(ctx, acks)
	if f != nil && f.stop(ctx) {
		// Another enricher may hold these conversations from now on: what
		// the hooks did not write before the fence is not written here.
		e.failures.WithLabelValues("lease_lost").Inc()
		e.logger.Warn("enricher lost its conversations' leases during a round; what it did not finish is left for redelivery",
			"exchanges", len(exs), "left", left)
	}
	return waited
}

// runHooks runs each of hooks over part (one conversation's turns after
// another's), in order, each under its own deadline (runHook); a hook that
// fails is run again after a backoff, up to Attempts times, while the
// hooks that succeeded are not — unless a hook before them succeeds only
// then (what it wrote, pins, a summary, is theirs to index) — so a failing
// hook (a side model's) never holds up the others' work, nor makes them do
// it twice. It reports whether part is done — enriched, or given up — rather than stopped by the round's fence
// (errLeaseLost), or by its enricher stopping while a failed hook was
// still to be retried, which leaves it to be enriched again, and how
// long it waited between attempts.
func (e *Enricher) runHooks(ctx, hctx context.Context, hooks []record.Hook, part []claimed) (done bool, waited time.Duration) {
	if len(part) == 0 {
		return true, 0
	}
	exs := make([]memory.Exchange, len(part))
	results := make([]memory.SaveResult, len(part))
	for i, c := range part {
		exs[i], results[i] = c.en.Exchange, c.en.Result
	}
	// The hooks cache nothing of a user erased since part was read from
	// the queue (cache.WithEpoch): its text was read before the erasure.
	base := hctx
	if epoch, ok := readEpoch(part); ok {
		hctx = cache.WithEpoch(base, epoch)
	}
	ok := make([]bool, len(hooks))    // the hooks done with part
	spent := make([]bool, len(hooks)) // the hooks that ran out their time on it
	delay := e.opts.BackoffBase
	for attempt := 1; ; attempt++ {
		var errs []error
		retry, again := false, false
		for i, hk := range hooks {
			if spent[i] || ok[i] && !again {
				continue
			}
			timedOut, err := e.runHook(hctx, hk, exs, results)
			if fenced(hctx) {
				return false, waited
			}
			if err != nil {
				ok[i] = false
				e.failures.WithLabelValues("hook").Inc()
				errs = append(errs, fmt.Errorf("hook %d (%T): %w", i, hk, err))
				spent[i] = timedOut
				retry = retry || !timedOut
				continue
			}
			again = again || (attempt > 1 && !ok[i])
			ok[i] = true
		}
		if len(errs) == 0 {
			break
		}
		err := errors.Join(errs...)
		if retry && attempt < e.opts.Attempts && ctx.Err() != nil {
			// Stopping: a hook still to be retried is not given up for
			// good; part stays unacknowledged, redelivered to the next run.
			e.logger.Warn("enricher stops with a round's hooks failed; their exchanges are left for redelivery", "exchanges", len(exs), "attempts", attempt, "err", err)
			return false, waited
		}
		if !retry || attempt >= e.opts.Attempts {
			e.failures.WithLabelValues("gave_up").Inc()
			e.logger.Error("enricher gives up on a round's failed hooks; the exchanges stay stored", "exchanges", len(exs), "attempts", attempt, "err", err)
			break
		}
		e.logger.Warn("enricher hooks failed; retrying those", "exchanges", len(exs), "attempt", attempt, "err", err)
		slept := time.Now()
		awake := pace.Sleep(hctx, delay)
		waited += time.Since(slept)
		if !awake {
			// Fenced, or stopping past the hooks' grace: left for
			// redelivery.
			return false, waited
		}
		delay = min(2*delay, e.opts.BackoffMax)
		if errors.Is(err, cache.ErrCleared) && e.opts.Erased != nil {
			hctx = e.refreshEpoch(base, hctx, part, results)
		}
	}
	return true, waited
}

// refreshEpoch returns hctx under an epoch taken now, for a retry of
// hooks refused or cancelled by a clear of the side calls
// (cache.ErrCleared: erasures may have been missed since part was read),
// after marking Dropped in results the exchanges of users the store
// records erased since (markErased): an erasure after the epoch still
// refuses or cancels their calls, one before it is in the store's record.
func (e *Enricher) refreshEpoch(base, hctx context.Context, part []claimed, results []memory.SaveResult) context.Context {
	epoch := cache.Epoch()
	marked := slices.Clone(part)
	e.markErased(hctx, marked)
	for i, c := range marked {
		results[i].Dropped = results[i].Dropped || c.en.Result.Dropped
	}
	return cache.WithEpoch(base, epoch)
}

// observe records in h the time from each exchange's capture to now.
func (e *Enricher) observe(h prometheus.Histogram, part []claimed) {
	now := time.Now()
	for _, c := range part {
		start := c.en.CapturedAt
		if start.IsZero() {
			start = c.en.Exchange.At
		}
		if !start.IsZero() {
			h.Observe(now.Sub(start).Seconds())
		}
	}
}

// runHook runs hk over exs (record.RunHooks) under its own deadline,
// HookTimeout, and reports whether a failure is that deadline running out
// (not the round's context ending).
func (e *Enricher) runHook(hctx context.Context, hk record.Hook, exs []memory.Exchange, results []memory.SaveResult) (timedOut bool, err error) {
	kctx, cancel := context.WithTimeout(hctx, e.opts.HookTimeout)
	defer cancel()
	err = record.RunHooks(kctx, []record.Hook{hk}, exs, results)
	return err != nil && hctx.Err() == nil && errors.Is(kctx.Err(), context.DeadlineExceeded), err
}

// ack acknowledges ids; entries it fails to acknowledge are redelivered.
func (e *Enricher) ack(ctx context.Context, ids []string) {
	if len(ids) == 0 {
		return
	}
	actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer acancel()
	if err := e.queue.Ack(actx, ids...); err != nil {
		e.failures.WithLabelValues("ack").Inc()
		e.logger.Warn("enricher cannot acknowledge; entries will be redelivered", "entries", len(ids), "err", err)
	}
}

// byConversation sorts cs so that each conversation's turns are together,
// in the order they were stored.
func byConversation(cs []claimed) {
	slices.SortStableFunc(cs, func(a, b claimed) int {
		x, y := a.en.Exchange.Identity, b.en.Exchange.Identity
		return cmp.Or(cmp.Compare(x.Tenant, y.Tenant), cmp.Compare(x.User, y.User), cmp.Compare(x.Conversation, y.Conversation))
	})
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
