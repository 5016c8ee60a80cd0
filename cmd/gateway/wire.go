package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/dialect/anthropic"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/proxy/upstream"
	"github.com/memgate/memgate/internal/redact"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/tokens"
)

// store is every contract the wiring hands a memory store to. Each
// driver's store meets all of them (the guards below), so a missing method
// fails the build, not a request.
type store interface {
	engine.Store
	cache.Store
	prompt.RevisionReader
	record.Saver
	record.BatchSaver
	record.DeadLetterer
	record.Adopter
	record.ChatLocker  // a chat's first turn and its continuation stored one at a time across processes
	record.StampReader // capture's check of what a long history's cut leaves out
	record.PurgeLedger // the queue purges not known to be done, retried by every process
	record.ReplyFinder // routing's: the conversation a cut history continues, by its newest reply
	record.HeldStore   // background responses' exchanges, held until a GET on any process returns them done
	enrich.Store
	enrich.FactWriter
	recall.ItemSearcher
	recall.TermStats     // recall's: the common words left out of its vector query
	recall.ContextReader // recall's: the turns around its hits
	recall.IndexStore
	recall.ManageStore
	recall.Reembedder
	Collectors() []prometheus.Collector // the store's caches
	Forget(tenant, user string)         // drops the user from the store's caches (another process erased them)
}

var (
	_ store                 = (*sqlite.Store)(nil)
	_ store                 = (*postgres.Store)(nil)
	_ recall.EmbeddingCache = recall.Embeddings{}
	_ cache.Forgetter       = recall.Embeddings{}
	_ record.Queue          = (*sqlite.Outbox)(nil)
	_ record.Queue          = (*redis.Queue)(nil)
	_ record.Queue          = (*record.MemoryQueue)(nil)
	_ record.Leaser         = (*redis.Queue)(nil)
	_ record.Leaser         = (*sqlite.Outbox)(nil)
	_ record.SharedQueue    = (*sqlite.Outbox)(nil)
	_ record.Scrubber       = (*redis.Queue)(nil)

	_ enrich.ConversationLeases = (*redis.Leases)(nil)
	_ engine.ErasureNotices     = (*redis.Erasures)(nil)
)

// Constants of the wiring.
const (
	// extractionTimeout bounds one fact-extraction model call.
	extractionTimeout = 30 * time.Second
)

// backend is an opened store with what its driver brings: the capture
// queue (nil: none) and the enrichment queue (durable false: in this
// process's memory); and the embedding cache, in this process's memory.
type backend struct {
	store         store
	queue, enrich record.Queue
	durable       bool
	embeddings    recall.Embeddings
	lease         record.Leaser // nil: every worker drains the capture queue
	enrichLease   record.Leaser // nil: every enricher drains the enrichment queue
	// conversations lets one enricher at a time enrich each conversation
	// while several drain the queue (Redis); nil: none.
	conversations enrich.ConversationLeases
	shared        record.SharedQueue // the capture queue, which gateways may share (Redis, the SQLite outbox); nil: none
	scrubber      record.Scrubber    // told after an erasure's or deletion's purge (Redis: rewrites its append-only file); nil: none
	// prune are the queues whose idle consumers (of stopped process runs)
	// the worker removes (Redis: the capture and enrichment streams).
	prune      []record.ConsumerPruner
	collectors []prometheus.Collector
	closers    []func() error
	// erasures are the erasure notices processes sharing Redis exchange;
	// nil without Redis.
	erasures *redis.Erasures
	// queueUnreachable: the Redis queue other processes share could not
	// be opened (engine.Core.QueueUnreachable).
	queueUnreachable bool
	// workerEnrich is the enrichment queue the capture worker fills: the
	// same stream as enrich, its calls not guarded by the Redis breaker
	// (the worker waits on no chat); enrich itself when no Redis.
	workerEnrich record.Queue
}

// close releases what openStore opened, last opened first.
func (b *backend) close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	return errors.Join(errs...)
}

// openStore opens the configured store, applying its migrations, and its
// queues: SQLite's outboxes; PostgreSQL's Redis streams and embedding
// cache when store.redis_url is set, else queues in this process's memory.
// The Redis ones go over rc, the process's client of store.redis_url and
// its breaker (openRedis), which the backend borrows and never closes;
// nil: the backend opens a client of its own (its breaker's metrics among
// the backend's) and closes it with the rest.
func openStore(ctx context.Context, cfg config.Config, rc *redisConn, logger *slog.Logger) (*backend, error) {
	c := cfg.Memory.Cache
	lim := itemindex.Limits{Vectors: c.VectorsMB << 20, Texts: c.TextsMB << 20, Items: c.ItemsMB << 20, Windows: c.TurnsMB << 20}
	emb := recall.NewEmbeddingCache(recall.DefaultEmbeddingBytes)
	switch sc := cfg.Store; sc.Driver {
	case "sqlite":
		st, err := sqlite.Open(ctx, sc.SQLitePath, logger)
		if err != nil {
			return nil, fmt.Errorf("open sqlite store: %w", err)
		}
		st.SetCacheLimits(lim)
		// Processes sharing the file share the outboxes: each one's lease lets one
		// process drain it; the capture outbox's per-conversation counts keep each
		// gateway's turns behind those another queued.
		ob, eob := st.Outbox(), st.EnrichOutbox()
		return &backend{store: st, queue: ob, lease: ob, shared: ob, enrich: eob, enrichLease: eob, durable: true, embeddings: emb, closers: []func() error{st.Close}}, nil
	case "postgres":
		pg, err := postgres.Open(ctx, sc.PostgresURL, logger)
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		pg.SetCacheLimits(lim)
		b := &backend{store: pg, enrich: record.NewMemoryQueue(0), embeddings: emb, closers: []func() error{pg.Close}}
		if sc.RedisURL == "" {
			return b, nil
		}
		if rc == nil {
			if rc, err = openRedis(cfg, logger); err != nil {
				return nil, errors.Join(err, b.close())
			}
			b.closers = append(b.closers, rc.Close)
			b.collectors = rc.breaker.Collectors()
		}
		b.erasures = redis.NewErasures(rc.client, sc.RedisPrefix, logger)
		q, err := redis.NewQueue(ctx, rc.client, redis.QueueConfig{Prefix: sc.RedisPrefix, Logger: logger, Breaker: rc.breaker})
		if err != nil {
			// Redis down at start-up: serve anyway, saving captures directly.
			logger.Warn("redis queue unavailable at start-up; capturing directly to postgres", "error", err)
			b.queueUnreachable = true
			return b, nil
		}
		eq, err := q.Sibling(ctx, "enrich")
		if err != nil {
			return nil, errors.Join(fmt.Errorf("enrichment queue: %w", err), b.close())
		}
		// Gateways and workers drain the enrichment stream together; each
		// conversation is enriched by one of them at a time (a lease per
		// conversation), so that the fleet enriches as many conversations
		// at once as it has enrichers, and none twice.
		b.enrich, b.workerEnrich, b.conversations = eq, eq.Unguarded(), eq.Leases()
		b.prune = []record.ConsumerPruner{q, eq}
		b.closers = append(b.closers, q.Close)
		b.queue, b.lease, b.shared, b.scrubber, b.durable = q, q, q, q, true
		b.collectors = append(b.collectors, q.Collectors()...)
		return b, nil
	}
	return nil, fmt.Errorf("store.driver %q: %w", cfg.Store.Driver, memory.ErrInvalid)
}

// redisConn is a process's client of the Redis beside PostgreSQL and the
// breaker its request-path calls share (redis.Breaker): once one of them
// times out, a chat request skips the others until Redis answers again.
type redisConn struct {
	client  *redis.Client
	breaker *redis.Breaker
}

// Close stops the breaker's probe, then closes the client.
func (c *redisConn) Close() error {
	c.breaker.Close()
	return c.client.Close()
}

// openRedis returns the client of the Redis beside PostgreSQL
// (store.redis_url) that a serving process's Redis users share, with its
// breaker: the capture and enrichment queues and the erasure notices
// (openStore), and the prints of users' newest exchanges (openPrints) and
// the users seen resending their history (newHTTP); nil without one.
// It does not connect until first used. The caller closes it once, after
// all of them.
func openRedis(cfg config.Config, logger *slog.Logger) (*redisConn, error) {
	sc := cfg.Store
	if sc.Driver != "postgres" || sc.RedisURL == "" {
		return nil, nil
	}
	rdb, err := redis.NewClient(sc.RedisURL)
	if err != nil {
		return nil, err
	}
	return &redisConn{client: rdb, breaker: redis.NewBreaker(rdb, logger)}, nil
}

// openPrints returns the prints of users' newest exchanges that the
// gateway processes share, so that an app's request about a chat is told
// on any of them (proxy.PrintStore): over rc, the client of the Redis
// beside PostgreSQL (openRedis), when capture.skip_transcripts is on;
// else nil (each process's own).
func openPrints(cfg config.Config, rc *redisConn) *redis.Prints {
	if rc == nil || !cfg.Capture.SkipTranscripts {
		return nil
	}
	return redis.NewPrints(rc.client, cfg.Store.RedisPrefix, rc.breaker)
}

// memoryLayer is the wired memory core with the wiring's view of it.
type memoryLayer struct {
	*engine.Core
	store      store
	embeddings recall.Embeddings // recall's cached vectors
	queue      record.Queue      // nil: captures are saved directly
	hooks      []record.Hook
	// index and side are hooks split in the enricher's two lanes
	// (enrich.EnrichOptions.Side): side the hooks that call a side model
	// (compaction, fact extraction) and then index what they wrote,
	// index the indexing of the exchanges' messages.
	index, side []record.Hook
	recall      *engine.Recall // nil when recall is off
}

// openMemory wires the memory core over the configured store: the
// after-save hooks (compaction, fact extraction, recall indexing), the
// budgeted assembler with recall, and the capture pipeline. An erasure
// (served here, or noticed from another process) makes forget forget the
// user too: what the process keeps of them outside the memory core (the
// proxy's prints of their exchanges; nil: nothing). A store it
// cannot open is engine.ErrStoreDown (storeOpenError), except one
// retrying would not help, which serve refuses. rc is the process's
// Redis client, which the store borrows (see openStore; nil: its own).
func openMemory(ctx context.Context, cfg config.Config, rc *redisConn, counter *tokens.Counter, forget cache.Forgetter, logger *slog.Logger) (*memoryLayer, error) {
	b, err := openStore(ctx, cfg, rc, logger)
	if err != nil {
		return nil, storeOpenError(err)
	}
	// What a request reads of the store besides its searches (recent
	// turns, facts, summaries) is kept in memory by the engine, under the
	// user's revision counters; saves and erasures go through it.
	// The fact extraction model's answers are kept in memory too, and
	// an erasure forgets the user's as it forgets their vectors; so are
	// the items indexing left for the idle backfill to embed.
	// So are, in the prompt assembler (made below), the recalled blocks
	// and summaries shown per conversation.
	// The calls in flight that carry users' text to a side model or the
	// embedder are kept per user too: an erasure, served here or
	// noticed, cancels the user's before it answers, and refuses those
	// whose text was read before it (cache.Calls).
	answers, deferred, assembler, calls := recall.NewAnswers(), recall.NewDeferred(), &lateForgetter{}, cache.NewCalls()
	forgets := cache.Forgetters{b.embeddings, answers, deferred, assembler, calls}
	if forget != nil {
		forgets = append(forgets, forget)
	}
	cs := withReads(cfg, b.store, forgets)
	core := &engine.Core{Store: cs, Close: b.close, EnrichInProcess: !b.durable, QueueUnreachable: b.queueUnreachable,
		Collectors: slices.Concat(b.store.Collectors(), cs.reads.Collectors(), b.embeddings.Collectors(), b.collectors)}
	if b.erasures != nil {
		// The erasures other processes serve reach this one's caches by
		// their notices, and this one's reach theirs; without Redis, the
		// caches' age bound (cache.UnrevisedMaxAge) does.
		core.Notices = b.erasures
		core.Collectors = append(core.Collectors, b.erasures.Collectors()...)
		b.closers = append(b.closers, runErasureNotices(b.erasures, noticed{cs.reads, b.store}))
	}
	b.store = cs
	m := &memoryLayer{Core: core, store: b.store, queue: b.queue, embeddings: b.embeddings}
	fail := func(err error) (*memoryLayer, error) { return nil, errors.Join(err, b.close()) }
	var red record.Redactor
	if cfg.Capture.Redact {
		r, err := redact.New(cfg.Capture.RedactPatterns)
		if err != nil {
			return fail(fmt.Errorf("capture.redact_patterns: %w", err))
		}
		red = r
	}
	if cfg.Compaction.Enabled {
		comp := newCompactor(cfg, b.store, counter, calls, logger)
		m.hooks = append(m.hooks, comp)
		m.side = append(m.side, comp)
		m.Collectors = append(m.Collectors, comp.Collectors()...)
	}
	var rec prompt.Recaller
	if cfg.Recall.Enabled {
		if m.recall, err = openRecall(cfg, b.store, b.embeddings, kept{answers, deferred, calls}, logger); err != nil {
			return fail(err)
		}
		m.hooks = append(m.hooks, m.recall.Hooks...)
		m.index = append(m.index, m.recall.Index)
		if len(m.side)+len(m.recall.Side) > 0 {
			m.side = append(append(m.side, m.recall.Side...), m.recall.Derived)
		}
		m.Collectors = append(m.Collectors, m.recall.Collectors...)
		m.Recall, rec = m.recall.Manager, m.recall.Recaller
	}
	if m.Prompt, err = newAssembler(cfg, cs, rec, red, counter, logger); err != nil {
		return fail(err)
	}
	assembler.set(m.Prompt)
	stale := cfg.Capture.ReclaimAfter.D()
	m.Router = record.NewRouter(cs, b.store, red, logger)
	// The Capturer and the Worker store a chat's first turn and its
	// continuation one at a time, with each other and with every process
	// sharing the store (record.ChatLocks over the store's locks).
	chats := record.NewChatLocks(b.store)
	m.Capturer = record.New(b.queue, b.store, red, logger, record.Options{Enrich: b.enrich, RetryFor: cfg.Capture.RetryFor.D(),
		Batches: b.store, DeadLetters: b.store, Adopter: b.store, Router: m.Router, Chats: chats, Shared: b.shared, Scrubber: b.scrubber,
		Stamps: b.store, Ledger: b.store, Held: b.store})
	if b.queue != nil {
		wo := workerOptions(cfg)
		wo.Enrich, wo.DeadLetters, wo.Adopter, wo.Router, wo.Chats, wo.Lease, wo.Prune = cmp.Or(b.workerEnrich, b.enrich), b.store, b.store, m.Router, chats, b.lease, b.prune
		m.Worker = record.NewWorker(b.queue, b.store, logger, wo)
	}
	// The enrichment rounds' spans come from the process's global tracer
	// provider (see tracing.Start), a no-op one while tracing is off.
	// The enricher's name is the process's own too (record.ProcessConsumer):
	// on SQLite it names the enrichment outbox's lease holder.
	// Side-model hooks run in their own lane: a side model that hangs
	// never holds up indexing. Without any, the indexer runs alone.
	hooks, side := m.hooks, []record.Hook(nil)
	if len(m.side) > 0 {
		hooks, side = m.index, m.side
	}
	m.Enricher = enrich.NewEnricher(b.enrich, hooks, logger, enrich.EnrichOptions{StaleAfter: stale, Interval: cfg.Capture.EnrichInterval.D(), Tracer: otel.GetTracerProvider(),
		Idle: m.recall.Backfill(), Lease: b.enrichLease, Conversations: b.conversations, Side: side, Erased: b.store.ErasedAt})
	return m, nil
}

// storeOpenError returns err, a store's Open failure, as openMemory
// returns it: engine.ErrStoreDown, retried in the background while the
// gateway serves as a plain proxy, except where retrying would not help
// and serve refuses it: a schema a newer build migrated
// (memory.ErrSchemaTooNew), or chat locks that do not hold on the way to
// PostgreSQL (postgres.ErrChatLocksDoNotHold: a pooler in statement
// mode, connections spread over several servers), under which no chat
// turn could be stored.
func storeOpenError(err error) error {
	if errors.Is(err, memory.ErrSchemaTooNew) || errors.Is(err, postgres.ErrChatLocksDoNotHold) {
		return err
	}
	return fmt.Errorf("%w: %w", engine.ErrStoreDown, err)
}

// workerOptions returns the capture worker's tunables from capture.*:
// reclaim_after (StaleAfter) and lock_stuck_after (LockStuckAfter); the
// wiring adds its dependencies.
func workerOptions(cfg config.Config) record.WorkerOptions {
	return record.WorkerOptions{StaleAfter: cfg.Capture.ReclaimAfter.D(), LockStuckAfter: cfg.Capture.LockStuckAfter.D()}
}

// newAssembler builds the prompt assembler: budget, shares and template
// from memory.*, facts cap from recall.*. rec nil: no recall. red is the
// capture's redactor (nil: none): the check of a resent history for
// edits compares messages as the capture stores them.
func newAssembler(cfg config.Config, st cachedStore, rec prompt.Recaller, red record.Redactor, counter *tokens.Counter, logger *slog.Logger) (*prompt.Assembler, error) {
	// Claude models (on /v1/messages, or any API) are counted with the documented upper-bound
	// estimate of internal/dialect/anthropic; a request, through its owner's view of counter.
	reads, unknown := st.reads, tokens.DefaultContextWindow
	deps := prompt.Deps{History: reads, Facts: reads, Recaller: rec, Revisions: st, Counter: anthropic.NewCounter(counter, unknown),
		Owned: func(t, u string) prompt.TokenCounter { return anthropic.NewCounter(counter.Owned(t, u), unknown) }}
	// The check of a full-history request's edits (Heads) serves the
	// summary, with compaction, and the facts and passages either way.
	deps.Heads = reads
	deps.StoredForm = func(m memory.Message) memory.Message { return record.StoredForm(m, red) }
	if cfg.Compaction.Enabled {
		deps.Summaries = reads
	}
	mc, sh := cfg.Memory, cfg.Memory.Shares
	a, err := prompt.NewAssembler(deps, prompt.Options{
		RecentMessages: cfg.HistoryMessages(), MaxContextTokens: mc.MaxContextTokens, CompletionReserve: mc.CompletionReserve,
		Shares:   prompt.Shares{Summary: sh.Summary, ExtractiveSummary: sh.ExtractiveSummary, Pinned: sh.Pinned, Facts: sh.Facts, Recall: sh.Recall, StatementRecall: sh.StatementRecall},
		FactsMax: cfg.Recall.FactsMaxInjected, Template: mc.Template, Position: prompt.Position(mc.Position), FillRecall: mc.FillRecall, KeepRecall: mc.KeepRecall, KeepRecallResent: mc.KeepRecallResent,
		FillWhen: prompt.RecallFill(mc.FillRecallWhen), StableFacts: mc.StableFacts, HoldSummary: mc.HoldSummary,
		LoadTimeout: mc.LoadTimeout.D(), EmbedTimeout: mc.EmbeddingTimeout.D(), HistoryKeep: cfg.Capture.MaxHistoryMessages,
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("memory.template: %w", err)
	}
	return a, nil
}

// newCompactor builds the compaction hook: the summariser is
// compaction.model (key compaction.api_key, else upstream.api_key; with
// neither, the extractive summariser alone) behind a breaker configured
// like the upstream's. The watermarks are fractions of the recent turns'
// share of the budget of a request to compaction.model.
func newCompactor(cfg config.Config, st store, counter *tokens.Counter, calls *cache.Calls, logger *slog.Logger) *enrich.Compactor {
	cp := cfg.Compaction
	count := func(s string) int { return counter.Text(cp.Model, s) }
	var primary enrich.Summarizer = enrich.NewExtractive(count)
	if c := sideModel(cp.BaseURL, cp.APIKey, cfg.Upstream, cp.Timeout.D()); c != nil {
		br := cfg.Upstream.Breaker
		primary = enrich.NewBreaker(enrich.NewLLM(c, cp.Model, count), uint32(br.ConsecutiveFailures), br.OpenTimeout.D())
	}
	budget, sh := cfg.Budget(counter.ContextWindow(cp.Model)), cfg.Memory.Shares
	maxSummary := cp.MaxSummaryTokens
	if s := int(sh.Summary * float64(budget)); s > 0 {
		maxSummary = min(maxSummary, s)
	}
	return enrich.New(st, st, primary, enrich.NewExtractive(count), counter, enrich.Options{
		RecentTokens: int(float64(budget) * max(0, 1-sh.Total())), HighWatermark: cp.HighWatermark, LowWatermark: cp.LowWatermark,
		MaxMessages: cp.MaxMessages, KeepMessages: cp.KeepMessages, MaxSummaryTokens: maxSummary, FallbackAfter: cp.FallbackAfter,
		MaxFacts: cfg.Recall.FactsMaxStored, Timeout: cp.Timeout.D(), Calls: calls, Model: cp.Model, Owned: func(t, u string) enrich.TokenCounter { return counter.Owned(t, u) },
	}, logger)
}

// sideModel is an OpenAI client for a side model at base (default
// upstream.base_url) with key (default upstream.api_key), each call
// bounded by timeout; nil when there is no key to send.
func sideModel(base, key string, up config.Upstream, timeout time.Duration) *openai.Client {
	if key == "" && up.APIKey == "" {
		return nil
	}
	return openaiClient(base, key, up, timeout, upstream.MaxSideReplyBytes)
}

// openaiClient is sideModel's client, made whether or not it has a key;
// each reply's body is bounded to maxBody bytes.
func openaiClient(base, key string, up config.Upstream, timeout time.Duration, maxBody int64) *openai.Client {
	oc := openai.DefaultConfig(cmp.Or(key, up.APIKey))
	oc.BaseURL, oc.HTTPClient = cmp.Or(base, up.BaseURL), &http.Client{Timeout: timeout, Transport: upstream.LimitBodies(http.DefaultTransport, maxBody)}
	return openai.NewClientWithConfig(oc)
}

// kept is what recall keeps of users in memory that erasures reach
// besides the embedding cache: the fact extraction model's answers and
// the items left for the idle backfill (nil: recall's own), and the
// calls in flight to the extraction model and the embedder (nil: none
// kept).
type kept struct {
	answers  *recall.Answers
	deferred *recall.Deferred
	calls    *cache.Calls
}

// openRecall wires recall over st with the embedder of recall.embeddings
// behind cache (nil: none), keeping what k names where k says.
func openRecall(cfg config.Config, st store, cache recall.EmbeddingCache, k kept, logger *slog.Logger) (*engine.Recall, error) {
	rc := cfg.Recall
	emb, cols, err := newEmbedder(rc.Embeddings, cfg.Upstream, cache, k.calls, logger)
	if err != nil {
		return nil, err
	}
	ttl := make(map[memory.FactType]time.Duration, len(rc.FactTTL))
	for typ, d := range rc.FactTTL {
		ttl[memory.FactType(typ)] = d.D()
	}
	opts := engine.RecallOptions{
		Search: recall.SearchOptions{TopK: rc.TopK, MinSimilarity: rc.MinSimilarity, RecencyHalfLife: rc.RecencyHalfLife.D(),
			// The encoder reads the question as a sentence: on eval/synth's
			// paraphrase probes whole questions put the statement first for
			// 10 of 12, their rarer words alone for 5.
			WholeQuery: rc.Embeddings.Provider == "encoder"},
		Recall:         recall.RecallOptions{CrossConversation: rc.CrossConversation, FactsMax: rc.FactsMaxInjected, FactRelevance: rc.MinSimilarity},
		FactsMaxStored: rc.FactsMaxStored, FactTTL: ttl,
		Extraction: recall.ExtractorOptions{Model: rc.Extraction.Model, Timeout: extractionTimeout, Answers: k.answers, Calls: k.calls},
		Deferred:   k.deferred,
	}
	if opts.Window, err = engine.EmbedderWindow(rc.Embeddings.Provider); err != nil {
		return nil, err
	}
	if c := sideModel(rc.Extraction.BaseURL, rc.Extraction.APIKey, cfg.Upstream, extractionTimeout); rc.Extraction.Enabled && c != nil {
		opts.Extractor = c
	}
	r := engine.NewRecall(st, emb, opts, logger)
	r.Collectors = append(cols, r.Collectors...)
	return r, nil
}

// maxEmbeddingWait bounds one call to an openai embeddings API. The
// upstream's first-byte timeout waits as long as the SDKs do for a model's
// answer; an embedding comes in seconds, and indexing waits for it.
const maxEmbeddingWait = 2 * time.Minute

// newEmbedder returns the embedder of ec behind cache (nil: none) and its
// collectors (see engine.NewEmbedder); openai's API is at ec.base_url
// (default upstream.base_url) with ec.api_key (default upstream.api_key), its
// replies bounded to 256 KiB a text (a 3,072-dimension vector is ~70 KiB of JSON).
func newEmbedder(ec config.Embeddings, up config.Upstream, cache recall.EmbeddingCache, calls *cache.Calls, logger *slog.Logger) (recall.Embedder, []prometheus.Collector, error) {
	return engine.NewEmbedder(engine.EmbedderOptions{Provider: ec.Provider, Model: ec.Model, Dims: ec.Dims(), Batch: ec.Batch, Concurrency: ec.Concurrency,
		Client: openaiClient(ec.BaseURL, ec.APIKey, up, min(up.FirstByteTimeout.D(), maxEmbeddingWait), int64(ec.Batch)<<18), Calls: calls}, cache, logger)
}

// cachedStore is a store whose reads besides its searches (recent turns,
// facts, summaries) the engine keeps, and whose saves and erasures reach
// what it keeps (cache.Reads). (What the other processes keep the
// engine's erasure notices reach: engine.Core.Notices.)
type cachedStore struct {
	store
	reads *cache.Reads
}

// lateForgetter is a cache.Forgetter made before what it forwards to
// (the prompt assembler, wired after the caches that forget with it and
// the erasure notices that may already call it): nothing until set.
type lateForgetter struct {
	mu sync.Mutex
	f  cache.Forgetter
}

// set makes l forward to f.
func (l *lateForgetter) set(f cache.Forgetter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f = f
}

// get returns what l forwards to (nil: not set yet).
func (l *lateForgetter) get() cache.Forgetter {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f
}

// Forget forwards to what l was set to, if any.
func (l *lateForgetter) Forget(tenant, user string) {
	if f := l.get(); f != nil {
		f.Forget(tenant, user)
	}
}

// Clear forwards to what l was set to, if any.
func (l *lateForgetter) Clear() {
	if f := l.get(); f != nil {
		f.Clear()
	}
}

// noticed is what an erasure notice reaches in this process: the engine's
// caches (reads, and what it forgets with) and the store's.
type noticed struct {
	reads *cache.Reads
	store interface{ Forget(tenant, user string) }
}

// Forget drops the user from every cache.
func (n noticed) Forget(tenant, user string) {
	n.reads.Forget(tenant, user)
	n.store.Forget(tenant, user)
}

// Clear drops everyone from the engine's caches (notices may have been
// missed); the store's recall index, whose every entry its revisions
// guard and which costs most to read again, stays.
func (n noticed) Clear() { n.reads.Clear() }

// runErasureNotices publishes the erasure notices this process queues
// and makes f forget the users whose notices arrive, until the returned
// stop is called (which publishes what is left, within a short bound).
func runErasureNotices(e *redis.Erasures, f redis.Forgetter) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.Run(ctx, f) })
	wg.Go(func() { e.Send(ctx) })
	return func() error {
		cancel()
		wg.Wait()
		return nil
	}
}

// withReads returns st with the engine's cache of its reads, bounded as
// memory.cache says; its erasures make forget (recall's embeddings and
// fact extraction answers) forget the user too (nil: none).
func withReads(cfg config.Config, st store, forget cache.Forgetter) cachedStore {
	return cachedStore{store: st, reads: cache.NewReads(st, forget, cfg.Memory.Cache.RecentMB<<20, cache.DefaultKnowledgeBytes)}
}

func (s cachedStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	return s.reads.SaveExchange(ctx, ex)
}
func (s cachedStore) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	return s.reads.SaveExchanges(ctx, exs)
}

// DeleteUser erases the user and, failed or not, drops what this process
// keeps of them (the engine's notice tells the other processes).
func (s cachedStore) DeleteUser(ctx context.Context, tenant, user string) error {
	return s.reads.DeleteUser(ctx, tenant, user)
}

// DeleteConversation deletes the conversation and, failed or not, drops
// what this process keeps of its user that no revision guards (recall's
// vectors and extraction answers, kept per user, not per conversation);
// the engine's notice tells the other processes.
func (s cachedStore) DeleteConversation(ctx context.Context, id memory.Identity) error {
	err := s.store.DeleteConversation(ctx, id)
	s.reads.Forget(id.Tenant, id.User)
	return err
}
func (s cachedStore) Head(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	return s.reads.Head(ctx, rev, id, n)
}
