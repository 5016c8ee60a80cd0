package main

import (
	"fmt"
	"log/slog"
	"net/http"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/dialect/anthropic"
	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/tokens"
)

// assemblerStore is what prompt assembly reads from the memory store.
type assemblerStore interface {
	prompt.HistoryReader
	prompt.SummaryReader
	prompt.FactReader
}

// compactionStore is what compaction reads and writes in the memory store.
type compactionStore interface {
	enrich.Store
	enrich.FactWriter
}

// budgetFor returns the token budget of a request to model that sets no
// max_tokens and no X-Memory-Budget, as prompt.Assembler.Budget computes it.
func budgetFor(cfg config.Config, counter *tokens.Counter, model string) int {
	return max(0, min(cfg.Memory.MaxContextTokens, counter.ContextWindow(model)-cfg.Memory.CompletionReserve))
}

// historyMessages is how many stored messages are loaded per request: enough
// for the unsummarised tail compaction leaves (it compacts past
// enrich.max_messages), never fewer than memory.recent_messages.
func historyMessages(cfg config.Config) int {
	n := cfg.Memory.RecentMessages
	if cfg.Compaction.Enabled && n > 0 {
		n = max(n, cfg.Compaction.MaxMessages+cfg.Compaction.KeepMessages)
	}
	return n
}

// newAssembler builds the request-side prompt assembler from cfg: budget,
// shares and template from memory.*, facts cap from recall.*. rec may be nil
// (no recall: only pinned facts are loaded from st).
func newAssembler(cfg config.Config, st assemblerStore, rec prompt.Recaller, counter *tokens.Counter, logger *slog.Logger) (*prompt.Assembler, error) {
	// Claude models (on /v1/messages, or any API) are counted with the
	// documented upper-bound estimate of internal/dialect/anthropic.
	deps := prompt.Deps{History: st, Summaries: st, Facts: st, Counter: anthropic.NewCounter(counter)}
	if rec != nil {
		deps.Recaller = rec
	}
	if !cfg.Compaction.Enabled {
		deps.Summaries = nil
	}
	a, err := prompt.NewAssembler(deps, prompt.Options{
		RecentMessages:    historyMessages(cfg),
		MaxContextTokens:  cfg.Memory.MaxContextTokens,
		CompletionReserve: cfg.Memory.CompletionReserve,
		Shares: prompt.Shares{Summary: cfg.Memory.Shares.Summary, ExtractiveSummary: cfg.Memory.Shares.ExtractiveSummary,
			Pinned: cfg.Memory.Shares.Pinned, Facts: cfg.Memory.Shares.Facts, Recall: cfg.Memory.Shares.Recall},
		FactsMax:     cfg.Recall.FactsMaxInjected,
		Template:     cfg.Memory.Template,
		Position:     prompt.Position(cfg.Memory.Position),
		FillRecall:   cfg.Memory.FillRecall,
		LoadTimeout:  cfg.Memory.LoadTimeout.D(),
		EmbedTimeout: cfg.Memory.EmbeddingTimeout.D(),
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("memory.template: %w", err)
	}
	return a, nil
}

// newCompactor builds the compaction after-save hook from cfg, or returns
// nil when enrich.enabled is false. The summariser is enrich.model
// at enrich.base_url (default upstream.base_url) with enrich.api_key
// (default upstream.api_key) — or, with neither key set, the extractive
// summariser alone (see sideModelKeys) — each call bounded by enrich.timeout,
// behind a circuit breaker configured like the upstream's; the extractive
// summariser takes over after enrich.fallback_after failures in a row.
// The watermarks are fractions of the recent turns' share of the budget of
// a request to enrich.model.
func newCompactor(cfg config.Config, st compactionStore, counter *tokens.Counter, logger *slog.Logger) *enrich.Compactor {
	cp := cfg.Compaction
	if !cp.Enabled {
		return nil
	}
	base, key := cp.BaseURL, cp.APIKey
	if base == "" {
		base = cfg.Upstream.BaseURL
	}
	if key == "" {
		key = cfg.Upstream.APIKey
	}
	count := func(s string) int { return counter.Text(cp.Model, s) }
	var primary enrich.Summarizer = enrich.NewExtractive(count)
	if key != "" {
		oc := openai.DefaultConfig(key)
		oc.BaseURL = base
		oc.HTTPClient = &http.Client{Timeout: cp.Timeout.D()}
		model := enrich.NewLLM(openai.NewClientWithConfig(oc), cp.Model, count)
		br := cfg.Upstream.Breaker
		primary = enrich.NewBreaker(model, uint32(br.ConsecutiveFailures), br.OpenTimeout.D())
	}

	budget := budgetFor(cfg, counter, cp.Model)
	sh := cfg.Memory.Shares
	recent := int(float64(budget) * max(0, 1-sh.Total()))
	maxSummary := cp.MaxSummaryTokens
	if s := int(sh.Summary * float64(budget)); s > 0 {
		maxSummary = min(maxSummary, s)
	}
	return enrich.New(st, st, primary, enrich.NewExtractive(count), counter, enrich.Options{
		RecentTokens:     recent,
		HighWatermark:    cp.HighWatermark,
		LowWatermark:     cp.LowWatermark,
		MaxMessages:      cp.MaxMessages,
		KeepMessages:     cp.KeepMessages,
		MaxSummaryTokens: maxSummary,
		FallbackAfter:    cp.FallbackAfter,
		MaxFacts:         cfg.Recall.FactsMaxStored,
		Timeout:          cp.Timeout.D(),
		Model:            cp.Model,
	}, logger)
}

// sideModelKeys warns, once at start-up, about the side-model calls that
// have no key to send — the summariser (enrich.api_key, else
// upstream.api_key) and fact extraction (recall.extraction.api_key, else
// upstream.api_key) — which are then not attempted: extractive summaries
// and pattern facts take over. With client pass-through auth the client's
// key is never reused for them.
func sideModelKeys(cfg config.Config, logger *slog.Logger) {
	if cfg.Compaction.Enabled && cfg.Compaction.APIKey == "" && cfg.Upstream.APIKey == "" {
		logger.Warn("no key for the summariser (enrich.api_key or upstream.api_key): summaries are extractive")
	}
	if cfg.Recall.Enabled && cfg.Recall.Extraction.Enabled && cfg.Recall.Extraction.APIKey == "" && cfg.Upstream.APIKey == "" {
		logger.Warn("no key for fact extraction (recall.extraction.api_key or upstream.api_key): only pattern-detected facts are kept")
	}
}

// extractionKey returns the key fact extraction sends, "" when it has none
// (and is then not attempted).
func extractionKey(cfg config.Config) string {
	if k := cfg.Recall.Extraction.APIKey; k != "" {
		return k
	}
	return cfg.Upstream.APIKey
}
