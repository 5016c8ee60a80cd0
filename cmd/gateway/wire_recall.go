package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/encoder"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/lexicon"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/redis"
)

// recallStore is what recall reads and writes in the memory store.
type recallStore interface {
	recall.ItemSearcher
	recall.IndexStore
	recall.ManageStore
}

// encoderBatch is how many texts one encoder batch of indexing holds: small
// enough that a waiting query gets a slot within a few tens of
// milliseconds.
const encoderBatch = 8

// embeddingCacheTTL is how long the Redis embedding cache keeps a vector.
const embeddingCacheTTL = 30 * 24 * time.Hour

// extractionTimeout bounds one fact-extraction model call.
const extractionTimeout = 30 * time.Second

// recallLayer is the wired recall: what the assembler, the capture worker
// and the management API use.
type recallLayer struct {
	// embedder embeds queries and items (behind the cache for openai).
	embedder recall.Embedder
	// recaller is the assembler's inject.Recaller.
	recaller *recall.Recaller
	// manager is proxy.Deps.Recall.
	manager *recall.Manager
	// hooks run after each capture, in order: fact extraction (when
	// enabled), then indexing (which indexes the facts just stated).
	hooks []record.Hook
	// collectors are recall's Prometheus collectors.
	collectors []prometheus.Collector
	closers    []func() error
}

// openRecall builds recall from cfg over st, or returns nil when
// recall.enabled is false. st must implement the Knowledge contract; the
// embedder is recall.embeddings.provider (see newEmbedder).
func openRecall(cfg config.Config, st any, logger *slog.Logger) (*recallLayer, error) {
	rc := cfg.Recall
	if !rc.Enabled {
		return nil, nil
	}
	rs, ok := st.(recallStore)
	if !ok {
		return nil, fmt.Errorf("recall: the %s store does not support recall (%T): %w", cfg.Store.Driver, st, memory.ErrInvalid)
	}
	emb, closers, err := newEmbedder(cfg, st, logger)
	if err != nil {
		return nil, err
	}
	l := &recallLayer{embedder: emb, closers: closers}
	if c, ok := emb.(interface{ Collectors() []prometheus.Collector }); ok {
		l.collectors = append(l.collectors, c.Collectors()...)
	}
	searcher := recall.NewSearcher(rs, emb, recall.SearchOptions{
		TopK:            rc.TopK,
		MinSimilarity:   rc.MinSimilarity,
		RecencyHalfLife: rc.RecencyHalfLife.D(),
		Expander:        newExpander(),
		// The encoder reads the question as a sentence: on eval/synth's
		// paraphrase probes whole questions put the statement first for
		// 10 of 12, their rarer words alone for 5.
		WholeQuery: rc.Embeddings.Provider == "encoder",
	})
	l.recaller = recall.NewRecaller(rs, searcher, emb, recall.RecallOptions{
		CrossConversation: rc.CrossConversation,
		FactsMax:          rc.FactsMaxInjected,
		FactRelevance:     rc.MinSimilarity,
	})
	indexer := recall.NewIndexer(rs, emb, logger)
	ttl := factTTL(rc.FactTTL)
	l.manager = recall.NewManager(rs, indexer, l.recaller, rc.FactsMaxStored, ttl)
	if rc.Extraction.Enabled && extractionKey(cfg) != "" {
		base, key := rc.Extraction.BaseURL, rc.Extraction.APIKey
		if base == "" {
			base = cfg.Upstream.BaseURL
		}
		if key == "" {
			key = cfg.Upstream.APIKey
		}
		oc := openai.DefaultConfig(key)
		oc.BaseURL = base
		oc.HTTPClient = &http.Client{Timeout: extractionTimeout}
		x := recall.NewExtractor(openai.NewClientWithConfig(oc), rs, recall.ExtractorOptions{
			Model:      rc.Extraction.Model,
			MaxPerUser: rc.FactsMaxStored,
			TTL:        ttl,
			Timeout:    extractionTimeout,
		}, logger)
		// One extraction per conversation over the turns a round of enrichment
		// holds, not one per turn.
		l.hooks = append(l.hooks, record.CoalesceTurns(x))
		l.collectors = append(l.collectors, x.Collectors()...)
	}
	l.hooks = append(l.hooks, indexer)
	return l, nil
}

// newExpander returns recall's query expander over the embedded English
// lexicon, or nil (no expansion) when the table fails to decode, a build
// defect the lexicon's tests catch.
func newExpander() *recall.Expander {
	lex, err := lexicon.Default()
	if err != nil {
		return nil
	}
	return recall.NewExpander(lex)
}

// close releases what openRecall opened.
func (l *recallLayer) close() error {
	if l == nil {
		return nil
	}
	var errs []error
	for i := len(l.closers) - 1; i >= 0; i-- {
		errs = append(errs, l.closers[i]())
	}
	return errors.Join(errs...)
}

// factTTL converts recall.fact_ttl to fact types.
func factTTL(in map[string]config.Duration) map[memory.FactType]time.Duration {
	out := make(map[memory.FactType]time.Duration, len(in))
	for typ, d := range in {
		out[memory.FactType(typ)] = d.D()
	}
	return out
}

// newEmbedder returns the configured embedder. Provider encoder is the
// built-in sentence encoder, at most recall.embeddings.concurrency calls at
// once (0: GOMAXPROCS; see recall.Bounded), behind the embedding cache.
// Provider local is the deterministic offline embedder with
// recall.embeddings.dimensions. Provider openai calls recall.embeddings.base_url (default upstream.base_url) with
// recall.embeddings.api_key (default upstream.api_key), model and
// dimensions, recall.embeddings.batch texts per call, behind an embedding
// cache keyed by content hash: the store's own table when it has one
// (sqlite), else Redis when store.redis_url is set (postgres), else none.
// The closers release what it opened.
func newEmbedder(cfg config.Config, st any, logger *slog.Logger) (recall.Embedder, []func() error, error) {
	ec := cfg.Recall.Embeddings
	var emb recall.Embedder
	switch ec.Provider {
	case "local":
		return recall.NewLocal(ec.Dims()), nil, nil
	case "encoder":
		m, err := encoder.Default()
		if err != nil {
			return nil, nil, fmt.Errorf("load the built-in encoder: %w", err)
		}
		slots := ec.Concurrency
		if slots <= 0 {
			slots = runtime.GOMAXPROCS(0)
		}
		emb = recall.NewBounded(encoder.NewEmbedder(m), slots, encoderBatch)
	case "openai":
		base, key := ec.BaseURL, ec.APIKey
		if base == "" {
			base = cfg.Upstream.BaseURL
		}
		if key == "" {
			key = cfg.Upstream.APIKey
		}
		oc := openai.DefaultConfig(key)
		oc.BaseURL = base
		oc.HTTPClient = &http.Client{Timeout: cfg.Upstream.FirstByteTimeout.D()}
		emb = recall.NewOpenAI(openai.NewClientWithConfig(oc), ec.Model, ec.Dims(), ec.Batch)
	default:
		return nil, nil, fmt.Errorf("recall.embeddings.provider %q: %w", ec.Provider, memory.ErrInvalid)
	}
	if cache, ok := st.(recall.EmbeddingCache); ok {
		return recall.NewCached(emb, cache, logger), nil, nil
	}
	if cfg.Store.RedisURL == "" {
		logger.Warn("no embedding cache: every text is embedded by the provider")
		return emb, nil, nil
	}
	rdb, err := redis.NewClient(cfg.Store.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("embedding cache: %w", err)
	}
	cache := redis.NewEmbeddingCache(rdb, cfg.Store.RedisPrefix, embeddingCacheTTL)
	return recall.NewCached(emb, cache, logger), []func() error{rdb.Close}, nil
}

// reindexBatch is how many items one reindex step reads, embeds and writes.
const reindexBatch = 256

// reindex re-embeds every memory item whose vector was made by another
// model or dimension than the configured embedder's, printing progress to
// stdout at most once a second. It is resumable: interrupted (SIGINT,
// SIGTERM), it stops after the batch in hand, and a rerun continues.
func reindex(ctx context.Context, getenv func(string) string, stdout, logw io.Writer) error {
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, _, closers, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	re, ok := st.(recall.Reembedder)
	if !ok {
		return fmt.Errorf("reindex: the %s store cannot list items to embed (%T)", cfg.Store.Driver, st)
	}
	emb, embClosers, err := newEmbedder(cfg, st, logger)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range embClosers {
			c()
		}
	}()
	fmt.Fprintf(stdout, "reindexing items not embedded with %s (%d dimensions)\n", emb.Model(), emb.Dims())
	start, last := time.Now(), time.Now()
	done, err := recall.Reindex(ctx, re, emb, reindexBatch, func(n int, lastID int64) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "reindexed %d items (up to id %d)\n", n, lastID)
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stdout, "interrupted after %d items; run reindex again to resume\n", done)
		}
		return fmt.Errorf("reindex: %w", err)
	}
	fmt.Fprintf(stdout, "reindexed %d items in %s\n", done, time.Since(start).Round(time.Millisecond))
	return nil
}
