package enrich

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// maxLoad bounds the unsummarised messages one compaction reads, and
// loadPage is how many it reads per call.
const (
	maxLoad  = 5000
	loadPage = 500
)

// Compact folds the oldest unsummarised messages of the conversation into
// its next summary version when they pass a trigger — more tokens than the
// high watermark, or more non-system messages than MaxMessages — keeping the
// newest ones, within the low watermark and KeepMessages, verbatim (an
// assistant tool call stays with its results). The new version covers the
// previous one and the messages that left, with cumulative CoveredTokens;
// the decisions the summariser preserved become pinned facts.
//
// Compactions of one conversation run one at a time in this process; one
// that loses the race to another process (memory.ErrConflict) is skipped.
// When the summariser fails the error is returned and nothing is stored —
// until FallbackAfter consecutive failures, from which on the fallback
// summariser writes the summary instead. A summary CheckSummary rejects
// (an echo of the instructions, a reply about nothing in the conversation)
// is never stored: the fallback writes that version at once.
func (c *Compactor) Compact(ctx context.Context, id memory.Identity, model string) error {
	return c.compact(ctx, id, model, time.Time{})
}

// compact is Compact, the summary and the decisions it pins guarded from
// guardSince (see memory.Fact.GuardSince; zero: not guarded).
func (c *Compactor) compact(ctx context.Context, id memory.Identity, model string, guardSince time.Time) error {
	key := id.Tenant + "\x00" + id.User + "\x00" + id.Conversation
	unlock, err := c.locks.Lock(ctx, key)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	defer unlock()

	var prev *memory.Summary
	s, err := c.store.LatestSummary(ctx, id)
	switch {
	case err == nil:
		prev = &s
	case !errors.Is(err, memory.ErrNotFound):
		return fmt.Errorf("compact: load summary: %w", err)
	}
	var after int64
	if prev != nil {
		after = prev.ToSeq
	}
	msgs, err := c.unsummarised(ctx, id, after)
	if err != nil {
		return err
	}
	counter := c.counter
	if c.opts.Owned != nil {
		counter = c.opts.Owned(id.Tenant, id.User)
	}
	leaving, covered := c.cut(counter, model, msgs)
	if len(leaving) == 0 {
		return nil
	}
	leaving, covered = oldestWithin(counter, model, leaving, c.opts.MaxInputTokens)
	in := Input{Previous: prev, Messages: leaving, MaxTokens: c.opts.MaxSummaryTokens}
	out, by, err := c.summarise(ctx, id, counter, model, in)
	if err != nil {
		c.failed.Inc()
		return fmt.Errorf("compact conversation %s: %w", id.Conversation, err)
	}
	// A summariser's lists are held to their bounds from the first
	// version on (a model's reply, or the extractive summary of a long
	// message, can list thousands).
	out.KeyEvents, out.Preserved = mergeLists(nil, memory.Preserved{}, out.KeyEvents, out.Preserved)
	next := memory.Summary{
		Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
		Version:       1,
		FromSeq:       leaving[0].Seq,
		ToSeq:         leaving[len(leaving)-1].Seq,
		Text:          out.Summary,
		KeyEvents:     out.KeyEvents,
		Preserved:     out.Preserved,
		Tokens:        counter.Text(model, out.Summary),
		CoveredTokens: covered,
		Summariser:    by,
		CreatedAt:     c.opts.Now(),
		GuardSince:    guardSince,
		Through:       leaving[len(leaving)-1].Key, // a store refuses a late version once it is gone
		Covers:        keys(leaving),               // and one of a branch the user replaced meanwhile
	}
	if prev != nil {
		next.Version = prev.Version + 1
		next.FromSeq = prev.FromSeq
		next.CoveredTokens += prev.CoveredTokens
		next.KeyEvents, next.Preserved = mergeLists(prev.KeyEvents, prev.Preserved, out.KeyEvents, out.Preserved)
	}
	if err := c.store.SaveSummary(ctx, next); err != nil {
		if errors.Is(err, memory.ErrConflict) {
			c.logger.DebugContext(ctx, "compaction lost a race; skipped", "conversation", id.Conversation, "version", next.Version)
			return nil
		}
		return fmt.Errorf("compact: save summary: %w", err)
	}
	c.summaries.WithLabelValues(by).Inc()
	c.logger.DebugContext(ctx, "conversation compacted", "conversation", id.Conversation, "version", next.Version,
		"messages", len(leaving), "to_seq", next.ToSeq, "summary_tokens", next.Tokens, "summariser", by)
	decisions, sources := usersDecisions(out.Preserved.Decisions, leaving)
	return c.pinDecisions(ctx, id, decisions, sources, guardSince)
}

// keys returns the keys of msgs, in order.
func keys(msgs []memory.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Key
	}
	return out
}

// unsummarised loads the live messages after seq, page by page, up to maxLoad.
func (c *Compactor) unsummarised(ctx context.Context, id memory.Identity, seq int64) ([]memory.Message, error) {
	var out []memory.Message
	for len(out) < maxLoad {
		page, err := c.store.MessagesAfter(ctx, id, seq, loadPage)
		if err != nil {
			return nil, fmt.Errorf("compact: load messages: %w", err)
		}
		out = append(out, page...)
		if len(page) < loadPage {
			break
		}
		seq = page[len(page)-1].Seq
	}
	return out, nil
}

// cut decides which of the unsummarised messages (oldest first) leave the
// recent window: none unless a trigger is passed; otherwise all but the
// newest whole units (a message, or an assistant tool call with its tool
// results, or a legacy function call with its function result)
// that fit within both the low watermark and KeepMessages, as counter
// measures them. It returns the leaving messages and what they cost
// verbatim. System messages and replies the upstream broke off
// (memory.Message.Failed) are left out: they are never summarised.
func (c *Compactor) cut(counter TokenCounter, model string, msgs []memory.Message) ([]memory.Message, int) {
	var (
		conv  []memory.Message
		costs []int
		total int
	)
	for _, m := range msgs {
		if memory.IsSystem(m.Role) || m.Failed() {
			continue // a reply the upstream broke off is never summarised
		}
		n := counter.Message(model, m)
		conv = append(conv, m)
		costs = append(costs, n)
		total += n
	}
	high := int(c.opts.HighWatermark * float64(c.opts.RecentTokens))
	low := int(c.opts.LowWatermark * float64(c.opts.RecentTokens))
	if total <= high && len(conv) <= c.opts.MaxMessages {
		return nil, 0
	}
	keep, kept := len(conv), 0
	for keep > 0 {
		start := keep - 1
		for start > 0 && memory.IsResult(conv[start].Role) {
			start--
		}
		n := 0
		for _, x := range costs[start:keep] {
			n += x
		}
		if kept+n > low || len(conv)-start > c.opts.KeepMessages {
			break
		}
		kept += n
		keep = start
	}
	return conv[:keep], total - kept
}

// oldestWithin returns the oldest whole units of leaving (a message, or an
// assistant tool call with its results) that cost at most limit together,
// at least the first unit whatever it costs, and what they cost.
func oldestWithin(counter TokenCounter, model string, leaving []memory.Message, limit int) ([]memory.Message, int) {
	end, sum := 0, 0
	for end < len(leaving) {
		next := end + 1
		for next < len(leaving) && memory.IsResult(leaving[next].Role) {
			next++
		}
		cost := 0
		for _, m := range leaving[end:next] {
			cost += counter.Message(model, m)
		}
		if end > 0 && sum+cost > limit {
			break
		}
		sum += cost
		end = next
	}
	return leaving[:end], sum
}

// primaryName is what a summary the primary wrote is stored as:
// "extractive" when the primary is the extractive summariser itself (no
// side model configured), else "model", so the inspector never calls an
// extract a model summary.
func (c *Compactor) primaryName() string {
	if _, ok := c.primary.(*Extractive); ok {
		return memory.SummariserExtractive
	}
	return memory.SummariserModel
}

// summarise runs the primary summariser under the timeout, falling back as
// documented on Compact (its summary measured by counter). It returns the
// output and which summariser wrote it. The primary (a side model) is not
// called once id's user was erased since in was read (opts.Calls), and
// their erasure cancels the call in flight: either is an error wrapping
// cache.ErrErased, with no fallback (what it wrote would be refused). A
// clear of the calls (an erasure notice subscription lost) is an error
// wrapping cache.ErrCleared instead, not counted as the summariser's
// failure: the round is retried, with a fresh epoch.
func (c *Compactor) summarise(ctx context.Context, id memory.Identity, counter TokenCounter, model string, in Input) (Output, string, error) {
	var err error
	if c.primary != nil {
		key := id.Tenant + "\x00" + id.User + "\x00" + id.Conversation
		sctx, end, berr := c.opts.Calls.Begin(ctx, cache.Owner{Tenant: id.Tenant, User: id.User})
		if berr != nil {
			return Output{}, "", fmt.Errorf("summarise: %w", berr)
		}
		cancel := context.CancelFunc(func() {})
		if c.opts.Timeout > 0 {
			sctx, cancel = context.WithTimeout(sctx, c.opts.Timeout)
		}
		out, perr := c.primary.Summarize(sctx, in)
		cause := context.Cause(sctx)
		cancel()
		end()
		if errors.Is(cause, cache.ErrErased) || errors.Is(cause, cache.ErrCleared) {
			return Output{}, "", fmt.Errorf("summarise: %w", cause)
		}
		if perr == nil {
			perr = CheckSummary(in, out, func(s string) int { return counter.Text(model, s) })
		}
		switch {
		case perr == nil:
			c.failures.reset(key)
			return out, c.primaryName(), nil
		case errors.Is(perr, ErrSummaryRejected):
			// The summariser answered, but with nothing worth keeping:
			// the extractive summary replaces it now, not after
			// FallbackAfter tries (the reason names no message content).
			c.rejected.Inc()
			c.logger.WarnContext(ctx, "summary rejected; using the extractive summary", "reason", perr)
			if c.fallback == nil {
				return Output{}, "", perr
			}
			out, ferr := c.fallback.Summarize(ctx, in)
			if ferr != nil {
				return Output{}, "", errors.Join(perr, ferr)
			}
			return out, memory.SummariserExtractive, nil
		}
		err = perr
		if ctx.Err() != nil {
			return Output{}, "", err
		}
		n := c.failures.inc(key)
		if c.fallback == nil || n < c.opts.FallbackAfter {
			return Output{}, "", err
		}
		c.logger.WarnContext(ctx, "summariser keeps failing; using the extractive fallback", "failures", n, "error", err)
	}
	if c.fallback == nil {
		return Output{}, "", errors.New("no summariser configured")
	}
	out, ferr := c.fallback.Summarize(ctx, in)
	if ferr != nil {
		return Output{}, "", errors.Join(err, ferr)
	}
	return out, memory.SummariserExtractive, nil
}

// pinDecisions records the user's decisions (usersDecisions) as pinned
// facts, guarded from guardSince, each stated in the message sources[i]
// names ("": none grounds it). A guarded one no message grounds is not
// pinned: a store refuses a guarded fact naming no message (see pin).
func (c *Compactor) pinDecisions(ctx context.Context, id memory.Identity, decisions, sources []string, guardSince time.Time) error {
	if c.facts == nil {
		return nil
	}
	now := c.opts.Now()
	for i, d := range decisions {
		source := sources[i]
		if d == "" || source == "" && !guardSince.IsZero() {
			continue
		}
		v := memory.Truncate(d, maxPinLen)
		f := memory.Fact{
			Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
			Type: memory.FactDecision, Key: NormalizeKey(v), Value: v,
			Confidence: 0.7, Mentions: 1, Pinned: true, CreatedAt: now, UpdatedAt: now,
			Source: source, GuardSince: guardSince,
		}
		if _, err := c.facts.UpsertFact(ctx, f, c.opts.MaxFacts); err != nil {
			return fmt.Errorf("pin decision: %w", err)
		}
		c.pins.Inc()
	}
	return nil
}

// Bounds on what a summary version carries over from its predecessors.
const (
	maxKeyEvents = 50
	maxPreserved = 100
)

// mergeLists is a summary's key events and preserved lists: b's after
// a's (see merge), each held to its bound.
func mergeLists(aEvents []string, a memory.Preserved, bEvents []string, b memory.Preserved) ([]string, memory.Preserved) {
	return merge(maxKeyEvents, aEvents, bEvents), memory.Preserved{
		Numbers:   merge(maxPreserved, a.Numbers, b.Numbers),
		Dates:     merge(maxPreserved, a.Dates, b.Dates),
		Decisions: merge(maxPreserved, a.Decisions, b.Decisions),
	}
}

// merge returns a then b without repeats, keeping the newest limit.
func merge(limit int, a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range [][]string{a, b} {
		for _, s := range list {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}
