package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/encoder"
	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/lexicon"
	"github.com/memgate/memgate/internal/memory"
)

// encoderBatch is how many texts one encoder batch of indexing holds: small
// enough that a waiting query gets a slot within a few tens of
// milliseconds.
const encoderBatch = 8

// EmbedderOptions choose an embedder (recall.embeddings).
type EmbedderOptions struct {
	// Provider is local (the deterministic offline embedder), encoder (the
	// built-in sentence encoder) or openai (an embeddings API).
	Provider    string
	Model       string
	Dims, Batch int
	// Concurrency bounds the encoder's calls at once (0: GOMAXPROCS).
	Concurrency int
	// Client is openai's API client.
	Client recall.EmbeddingsClient
	// Calls keeps the cached embedder's calls in flight per owner, so
	// that an erasure cancels those carrying the user's text (nil: none).
	Calls recall.Calls
}

// NewEmbedder returns the embedder opts choose, behind cache (nil: none),
// and its Prometheus collectors. local is never cached: it is cheaper than
// the cache.
func NewEmbedder(opts EmbedderOptions, cache recall.EmbeddingCache, logger *slog.Logger) (recall.Embedder, []prometheus.Collector, error) {
	var emb recall.Embedder
	var cols []prometheus.Collector
	switch opts.Provider {
	case "local":
		return recall.NewLocal(opts.Dims), nil, nil
	case "encoder":
		m, err := encoder.Default()
		if err != nil {
			return nil, nil, fmt.Errorf("load the built-in encoder: %w", err)
		}
		slots := opts.Concurrency
		if slots <= 0 {
			slots = runtime.GOMAXPROCS(0)
		}
		b := recall.NewBounded(encoder.NewEmbedder(m), slots, encoderBatch)
		emb, cols = b, b.Collectors()
	case "openai":
		o := recall.NewOpenAI(opts.Client, opts.Model, opts.Dims, opts.Batch)
		emb, cols = o, o.Collectors()
	default:
		return nil, nil, fmt.Errorf("recall.embeddings.provider %q: %w", opts.Provider, memory.ErrInvalid)
	}
	if cache == nil {
		logger.Warn("no embedding cache: every text is embedded by the provider")
		return emb, cols, nil
	}
	return recall.NewCached(emb, cache, opts.Calls), cols, nil
}

// EmbedderWindow is how much of a text provider's embedder reads: the
// built-in encoder's first encoder.MaxTokens pieces; nil for the others,
// which read whole texts (local) or thousands of tokens (openai).
func EmbedderWindow(provider string) (*recall.Window, error) {
	if provider != "encoder" {
		return nil, nil
	}
	m, err := encoder.Default()
	if err != nil {
		return nil, fmt.Errorf("load the built-in encoder: %w", err)
	}
	tok := m.Tokenizer()
	return &recall.Window{Pieces: func(s string) int { return len(tok.Encode(s)) }, Max: encoder.MaxTokens}, nil
}

// RecallStore is what recall reads and writes in the memory store: its
// searches with their term statistics, the turns around a recalled
// message, its index and facts.
type RecallStore interface {
	recall.ItemSearcher
	recall.TermStats
	recall.ContextReader
	recall.IndexStore
	recall.ManageStore
	recall.FactWriter
}

// RecallOptions configure recall.
type RecallOptions struct {
	// Search tunes the searcher; a nil Expander is the embedded English
	// lexicon's.
	Search recall.SearchOptions
	Recall recall.RecallOptions
	// FactsMaxStored caps a user's stored facts; FactTTL ages them by type.
	FactsMaxStored int
	FactTTL        map[memory.FactType]time.Duration
	// Extractor, when set, states facts from each round of enrichment's
	// turns with Extraction's model and timeout.
	Extractor  recall.Chatter
	Extraction recall.ExtractorOptions
	// Window is how much of a text the embedder reads (EmbedderWindow);
	// nil: all of it.
	Window *recall.Window
	// Deferred, when set, keeps what indexing leaves for Backfill, where
	// erasures reach it (recall.Deferred.Forget); nil: the indexer's own.
	Deferred *recall.Deferred
}

// Recall is recall wired over a store: what the assembler, the after-save
// hooks and the management API use.
type Recall struct {
	Embedder recall.Embedder
	Recaller *recall.Recaller
	Manager  *recall.Manager
	// Hooks run after each capture, in order: fact extraction (with an
	// Extractor), then indexing (which indexes the facts just stated).
	Hooks []record.Hook
	// Side, Index and Derived are Hooks split for an enricher's two
	// lanes (enrich.EnrichOptions.Side): Side the hooks that call a side
	// model (fact extraction), Index the indexing of the exchanges'
	// messages (recall.Indexer.Messages), Derived the indexing of what
	// the side hooks wrote (recall.Indexer.Derived), run after them.
	Side           []record.Hook
	Index, Derived record.Hook
	Collectors     []prometheus.Collector
	// indexer is the indexing hook, for Backfill.
	indexer *recall.Indexer
}

// Backfill returns the enricher's idle work (enrich.EnrichOptions.Idle):
// the indexer's Backfill, which indexes, a bounded round a call, what the
// store's index backlog holds (the rest of exchanges too long for one
// round), then embeds, a batch a call, what indexing left without a
// vector for want of a user's budget. A nil Recall (recall off) has none:
// nil.
func (r *Recall) Backfill() func(ctx context.Context) (int, error) {
	if r == nil {
		return nil
	}
	return r.indexer.Backfill
}

// DrainIndexBacklog indexes everything st's index backlog holds (what
// exchanges too long for one round of indexing left), round after round,
// cutting texts for the embedder provider names as the gateway does
// (EmbedderWindow), and returns how many rounds it ran: `gateway
// reindex`'s first step.
func DrainIndexBacklog(ctx context.Context, st recall.IndexStore, emb recall.Embedder, provider string, logger *slog.Logger) (int, error) {
	ix := recall.NewIndexer(st, emb, logger)
	w, err := EmbedderWindow(provider)
	if err != nil {
		return 0, err
	}
	ix.Window = w
	rounds, err := ix.DrainBacklog(ctx)
	if err != nil {
		return rounds, fmt.Errorf("index the backlog: %w", err)
	}
	return rounds, nil
}

// NewRecall wires recall over st with emb.
func NewRecall(st RecallStore, emb recall.Embedder, opts RecallOptions, logger *slog.Logger) *Recall {
	if opts.Search.Expander == nil {
		if lex, err := lexicon.Default(); err == nil { // else a build defect the lexicon's tests catch
			opts.Search.Expander = recall.NewExpander(lex)
		}
	}
	r := &Recall{Embedder: emb}
	opts.Search.Stats, opts.Recall.Around = st, st
	r.Recaller = recall.NewRecaller(st, recall.NewSearcher(st, emb, opts.Search), emb, opts.Recall)
	indexer := recall.NewIndexer(st, emb, logger)
	indexer.Window = opts.Window
	if opts.Deferred != nil {
		indexer.UseDeferred(opts.Deferred)
	}
	r.Manager = recall.NewManager(st, indexer, r.Recaller, opts.FactsMaxStored, opts.FactTTL)
	if opts.Extractor != nil {
		xo := opts.Extraction
		xo.MaxPerUser, xo.TTL = opts.FactsMaxStored, opts.FactTTL
		if xo.Erased == nil {
			xo.Erased = st.ErasedAt // a call a clear of Calls cancelled is made again unless the user was erased
		}
		x := recall.NewExtractor(opts.Extractor, st, xo, logger)
		// One extraction per conversation over the turns a round of
		// enrichment holds, not one per turn.
		r.Hooks = append(r.Hooks, enrich.CoalesceTurns(x))
		r.Side = append(r.Side, enrich.CoalesceTurns(x))
		r.Collectors = append(r.Collectors, x.Collectors()...)
	}
	r.Hooks, r.indexer = append(r.Hooks, indexer), indexer
	r.Index, r.Derived = indexer.Messages(), indexer.Derived()
	return r
}
