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

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/keylock"
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
	// Conversation returns the conversation's live messages, or
	// memory.ErrNotFound (read to find a redelivered exchange's messages).
	Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error)
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

// DefaultMaxInputTokens is Options.MaxInputTokens's default: what a side
// model's context holds beside the instructions, and what one summary
// call costs at most.
const DefaultMaxInputTokens = 24000

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
	// MaxInputTokens bounds the messages one compaction sends the
	// summariser (0: DefaultMaxInputTokens): a history resent whole leaves
	// the window in thousands of messages at once, and is summarised a
	// bounded piece at a time, oldest first, by the compactions that follow.
	MaxInputTokens int
	// FallbackAfter consecutive failures of the summariser for a
	// conversation make the fallback summariser write the summary.
	FallbackAfter int
	// MaxFacts caps a user's current facts (UpsertFact's maxPerUser).
	MaxFacts int
	// Timeout bounds one call of the summariser (0: none).
	Timeout time.Duration
	// Calls keeps the summariser's calls in flight per user, so that the
	// user's erasure cancels them, and refuses a call whose messages were
	// read before it (cache.Calls.Begin); nil: none.
	Calls *cache.Calls
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

	locks    keylock.Locks[string]
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
	if opts.MaxInputTokens <= 0 {
		opts.MaxInputTokens = DefaultMaxInputTokens
	}
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

// Bounds on what pin reads and records of one save: a first request
// resending a long history stores thousands of user messages at once, and
// each pin is a write transaction (about 1.3 ms of SQLite's CPU). The
// newest messages are read first; an ordinary exchange, or a history's
// last few dozen turns, fits.
const (
	// maxExchangePins is the most pins one save records.
	maxExchangePins = 64
	// maxExchangeScanBytes bounds the bytes of the user messages read
	// for pins (each counted up to maxScanBytes, what Detect reads).
	maxExchangeScanBytes = 64 << 10
)

// pin records the facts the user messages the save stored state (ex's
// turn for a redelivery, which stored nothing), and those it revised
// (res.Revised: the new texts of messages edited deep in a long chat,
// each dated when its old text was said), as pinned facts, each with
// the rule that pinned it and the key of the stored message that stated
// it (see stated). A guarded pin (res.GuardSince set:
// the hooks', which may run late) is recorded only as stated in a message
// found stored: a store refuses a guarded fact naming none, since nothing
// tells which conversation of its name it was made from. An exchange
// stored anew (not Duplicate) is pinned even when its id was pinned
// before: an import's ids derive from its content, so a conversation
// deleted (its facts with it) and imported again brings back the same ids.
func (c *Compactor) pin(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error {
	if c.facts == nil || (res.Duplicate && c.pinned.Has(ex.ID)) {
		return nil // a redelivery of an exchange pinned already
	}
	at := ex.At
	if at.IsZero() {
		at = c.opts.Now()
	}
	// What the save stored is read, the history it stored with the turn
	// included (a chat whose continuation was stored first resends its
	// first turn, which is then not stored again); a save that stored
	// nothing (a redelivery) leaves ex's turn.
	said := ex.Turn
	if len(res.Stored) > 0 {
		said = res.Stored
	}
	// The messages the save revised (an edit of an old message, stored
	// in its place) are read too, each stated in its own message, when
	// the old text was said.
	base := len(said)
	said = append(slices.Clip(said), res.Revised...)
	// Newest first, within maxExchangePins and maxExchangeScanBytes;
	// recorded below in the order said.
	pins := make([][]Pin, len(said))
	found, kept, read := false, 0, 0
	for i := len(said) - 1; i >= 0 && kept < maxExchangePins && read < maxExchangeScanBytes; i-- {
		if m := said[i]; m.Role == "user" && !m.Failed() {
			read += min(len(m.Content), maxScanBytes)
			ps := Detect(m.Content)
			pins[i] = ps[max(0, len(ps)-(maxExchangePins-kept)):]
			kept += len(pins[i])
			found = found || len(pins[i]) > 0
		}
	}
	if !found {
		c.pinned.Add(ex.ID)
		return nil
	}
	conv, keys, err := c.stated(ctx, ex, res)
	if err != nil {
		return fmt.Errorf("pin facts: %w", err)
	}
	for i, ps := range pins {
		key, when := "", at
		if i < base {
			key = keys[i]
		} else { // a revised message
			key, when = said[i].Key, cmp.Or(said[i].CreatedAt, at)
		}
		if key == "" && !res.GuardSince.IsZero() {
			continue
		}
		for _, p := range ps {
			f := p.Fact
			f.Tenant, f.User, f.Conversation = ex.Tenant, ex.User, conv
			f.Rule, f.Source = p.Rule, key
			f.CreatedAt, f.UpdatedAt = when, when
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

// stated returns the conversation that holds the messages pin reads and
// their stored keys, by index ("" for one not found): res.Stored's own,
// or, when the save inserted nothing (a redelivered exchange's duplicate
// save), those of ex.Turn among ex's messages (memory.OfExchange) the
// store holds live in ex's conversation, else in its candidate one,
// where its chat's continuation may have moved them (see
// memory.Exchange.Candidate).
func (c *Compactor) stated(ctx context.Context, ex memory.Exchange, res memory.SaveResult) (string, []string, error) {
	if len(res.Stored) > 0 {
		keys := make([]string, len(res.Stored))
		for i, m := range res.Stored {
			keys[i] = m.Key
		}
		return ex.Conversation, keys, nil
	}
	convs := []string{ex.Conversation}
	if ex.Candidate != "" && ex.Candidate != ex.Conversation {
		convs = append(convs, ex.Candidate)
	}
	for _, conv := range convs {
		id := ex.Identity
		id.Conversation = conv
		_, live, err := c.store.Conversation(ctx, id)
		switch {
		case errors.Is(err, memory.ErrNotFound):
			continue
		case err != nil:
			return "", nil, fmt.Errorf("load conversation %s: %w", conv, err)
		}
		if mine := memory.OfExchange(ex.ID, live); len(mine) > 0 {
			return conv, turnKeys(ex.Turn, mine), nil
		}
	}
	return ex.Conversation, make([]string, len(ex.Turn)), nil
}

// turnKeys returns the keys of turn's messages among stored, an
// exchange's messages as stored (oldest first: the history it stored, the
// turn, the reply), by index ("" for one not found): each is matched, the
// newest first, to the newest message of stored before the last match
// with its role and content, so a turn repeating its history's words
// names its own message.
func turnKeys(turn, stored []memory.Message) []string {
	keys := make([]string, len(turn))
	next := len(stored)
	for i := len(turn) - 1; i >= 0; i-- {
		for j := next - 1; j >= 0; j-- {
			if st := stored[j]; st.Role == turn[i].Role && st.Content == turn[i].Content {
				keys[i], next = st.Key, j
				break
			}
		}
	}
	return keys
}
