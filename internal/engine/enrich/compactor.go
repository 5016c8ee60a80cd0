package enrich

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/seen"
)

// Store is what compaction needs of a memory store: the unsummarised
// messages and the summary versions.
type Store interface {
	// MessagesAfter returns up to limit live messages with Seq > afterSeq, oldest first.
	MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error)
	// LatestSummary returns the newest summary version, or memory.ErrNotFound.
	LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
	// SaveSummary stores version latest+1, or returns memory.ErrConflict.
	SaveSummary(ctx context.Context, s memory.Summary) error
}

// FactWriter records facts about a user.
type FactWriter interface {
	// UpsertFact records f, keeping at most maxPerUser current facts.
	UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error)
}

// Summarizer folds the previous summary and the messages leaving the recent
// window into the next summary. *LLM, *Extractive and *Breaker implement it.
type Summarizer interface {
	Summarize(ctx context.Context, in Input) (Output, error)
}

// TokenCounter measures messages and text for a model. *tokens.Counter
// implements it.
type TokenCounter interface {
	Message(model string, m memory.Message) int
	Text(model, s string) int
}

// Options tunes a Compactor.
type Options struct {
	// RecentTokens is the recent turns' share of the default budget; the
	// watermarks are fractions of it.
	RecentTokens int
	// HighWatermark: unsummarised history above HighWatermark×RecentTokens
	// is compacted down to LowWatermark×RecentTokens.
	HighWatermark, LowWatermark float64
	// MaxMessages: more unsummarised non-system messages than this are
	// compacted down to KeepMessages.
	MaxMessages, KeepMessages int
	// MaxSummaryTokens bounds one summary.
	MaxSummaryTokens int
	// FallbackAfter consecutive failures of the summariser for a
	// conversation make the fallback summariser write the summary.
	FallbackAfter int
	// MaxFacts caps a user's current facts (UpsertFact's maxPerUser).
	MaxFacts int
	// Timeout bounds one call of the summariser (0: none).
	Timeout time.Duration
	// Model counts tokens for exchanges that name no model.
	Model string
	// Owned, when set, gives the counter a compaction counts through: its
	// conversation owner's view of New's (*tokens.Counter's Owned), whose
	// remembered counts no other owner finds. nil: New's counts for all.
	Owned func(tenant, user string) TokenCounter
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Compactor keeps conversations bounded, after each stored exchange: it pins
// the goals, limits, preferences and decisions the user stated, and when the
// unsummarised history passes a trigger it folds the oldest of it into the
// next rolling summary version. It implements record.Hook and is safe for
// concurrent use.
type Compactor struct {
	store    Store
	facts    FactWriter
	primary  Summarizer
	fallback Summarizer
	counter  TokenCounter
	opts     Options
	logger   *slog.Logger

	locks    keyedLocks
	failures failureCounts
	pinned   seen.Set

	summaries *prometheus.CounterVec
	failed    prometheus.Counter
	rejected  prometheus.Counter
	pins      prometheus.Counter
}

// New returns a Compactor. primary is the summariser normally used (nil
// uses fallback only); fallback (nil: none) writes the summary once primary
// failed FallbackAfter times in a row for a conversation. logger may be nil.
func New(store Store, facts FactWriter, primary, fallback Summarizer, counter TokenCounter, opts Options, logger *slog.Logger) *Compactor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.FallbackAfter = max(opts.FallbackAfter, 1)
	return &Compactor{
		store: store, facts: facts, primary: primary, fallback: fallback, counter: counter, opts: opts, logger: logger,
		pinned: seen.Set{Max: 4096},
		summaries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_compaction_summaries_total", Help: "Summary versions written, by summariser (model, extractive).",
		}, []string{"summariser"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_compaction_failures_total", Help: "Compactions that failed (summariser error or open breaker) and will be retried.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_compaction_summaries_rejected_total", Help: "Model summaries rejected (echoed instructions, not about the conversation, too long) and replaced by the extractive summary.",
		}),
		pins: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_compaction_pinned_facts_total", Help: "Pinned facts recorded from user statements and summary decisions.",
		}),
	}
}

// Collectors returns the Compactor's metrics for the caller to register.
func (c *Compactor) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.summaries, c.failed, c.rejected, c.pins}
}

// AfterSave pins what the exchange's user messages state and compacts the
// conversation when a trigger is passed. It is idempotent: a redelivered
// exchange pins nothing twice (within this process) and compaction only
// acts on the store's current state. A summariser failure is returned, so
// the capture worker retries later.
func (c *Compactor) AfterSave(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error {
	if res.Dropped || ex.Tenant == "" || ex.User == "" || ex.Conversation == "" {
		return nil
	}
	pinErr := c.pin(ctx, ex, res)
	model := ex.Model
	if model == "" {
		model = c.opts.Model
	}
	return errors.Join(pinErr, c.compact(ctx, ex.Identity, model, res.GuardSince))
}

// AfterSaveBatch does what AfterSave does for each exchange of a batch
// (it implements record.Hook), compacting each conversation once,
// after the pins of all its exchanges: the summary then covers the whole
// batch, and the conversation is read and counted once.
func (c *Compactor) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	var errs []error
	models := map[memory.Identity]string{}
	guards := map[memory.Identity]time.Time{} // the write path gives a user's exchanges one guard
	var order []memory.Identity
	for i, ex := range exs {
		if results[i].Dropped || ex.Tenant == "" || ex.User == "" || ex.Conversation == "" {
			continue
		}
		if err := c.pin(ctx, ex, results[i]); err != nil {
			errs = append(errs, err)
		}
		model := ex.Model
		if model == "" {
			model = c.opts.Model
		}
		if _, ok := models[ex.Identity]; !ok {
			order = append(order, ex.Identity)
			guards[ex.Identity] = results[i].GuardSince
		}
		models[ex.Identity] = model
	}
	for _, id := range order {
		if err := c.compact(ctx, id, models[id], guards[id]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pin records the facts the exchange's user messages state as pinned
// facts, each with the rule that pinned it and the key of the message
// that stated it (see turnKeys).
func (c *Compactor) pin(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error {
	if c.facts == nil || c.pinned.Has(ex.ID) {
		return nil
	}
	at := ex.At
	if at.IsZero() {
		at = c.opts.Now()
	}
	keys := turnKeys(ex, res)
	for i, m := range ex.Turn {
		if m.Role != "user" || m.Failed() {
			continue
		}
		for _, p := range Detect(m.Content) {
			f := p.Fact
			f.Tenant, f.User, f.Conversation = ex.Tenant, ex.User, ex.Conversation
			f.Rule, f.Source = p.Rule, keys[i]
			f.CreatedAt, f.UpdatedAt = at, at
			f.GuardSince = res.GuardSince
			if _, err := c.facts.UpsertFact(ctx, f, c.opts.MaxFacts); err != nil {
				return fmt.Errorf("pin fact: %w", err)
			}
			c.pins.Inc()
		}
	}
	c.pinned.Add(ex.ID)
	return nil
}

// turnKeys returns the stored keys of ex.Turn's messages, by index ("" for
// one not known): each is matched, in order, to a message of res.Stored
// (what this save inserted) with its role and content. A duplicate save
// inserted nothing of its own, and its keys are not known here.
func turnKeys(ex memory.Exchange, res memory.SaveResult) []string {
	keys := make([]string, len(ex.Turn))
	next := 0
	for i, m := range ex.Turn {
		for j := next; j < len(res.Stored); j++ {
			if st := res.Stored[j]; st.Role == m.Role && st.Content == m.Content {
				keys[i], next = st.Key, j+1
				break
			}
		}
	}
	return keys
}
