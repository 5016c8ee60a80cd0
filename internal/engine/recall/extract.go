package recall

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// Chatter is the one call the fact extractor makes (go-openai's client).
type Chatter interface {
	CreateChatCompletion(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error)
}

// FactWriter records facts about users.
type FactWriter interface {
	// UpsertFact records f per (tenant, user, type, normalised key) and
	// returns the current fact; see storetest.Knowledge.
	UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error)
}

// Limits of a valid extraction reply.
const (
	// MaxFactValue is the longest fact value kept, in characters.
	MaxFactValue = 300
	// MaxFactKey is the longest fact key kept, in characters.
	MaxFactKey = 64
	// MaxExtracted is how many facts one reply may carry; a longer reply is
	// cut to its first MaxExtracted items, the rest counted as dropped.
	MaxExtracted = 20
	// maxReplyBytes bounds the reply parsed at all.
	maxReplyBytes = 64 << 10
)

// ExtractorOptions tune an Extractor.
type ExtractorOptions struct {
	// Model is the extraction model.
	Model string
	// MaxPerUser is the cap on current facts per user (facts_max_stored).
	MaxPerUser int
	// TTL gives facts of a type an expiry after they were stated.
	TTL map[memory.FactType]time.Duration
	// Timeout bounds one model call (default 30s).
	Timeout time.Duration
	// Answers keeps the model's answers (answers.go); nil: the
	// Extractor's own. Given, the user's erasure can drop theirs
	// (Answers.Forget).
	Answers *Answers
	// Calls keeps the model calls in flight per user, so that the user's
	// erasure cancels them, and refuses a call whose text was read before
	// it (cache.Calls.Begin); nil: none.
	Calls *cache.Calls
	// Erased reports when a user was last erased (the store's ErasedAt;
	// zero: never): after a call refused or cancelled by a clear of Calls
	// (cache.ErrCleared), whether the user was really erased since the
	// exchange was captured, or the call is made again. Nil: it is not
	// made again, and the round is retried.
	Erased func(ctx context.Context, tenant, user string) (time.Time, error)
}

// Extractor is the capture hook that asks a model which facts the user
// stated in an exchange and records the valid ones.
//
// Extraction is best effort: when the model fails or replies with anything
// but the JSON asked for, the failure is counted and logged (without message
// contents) and AfterSave returns nil, so capture never waits on an
// unavailable model; pattern-detected facts (compaction) keep flowing. A
// redelivered exchange (res.Duplicate) is not extracted again, since
// re-stating a fact would raise its mention count. The model's answers
// are kept, bounded, per user and question (answers.go): an enrichment
// round redone in this process — after a store failure, a lost lease or a
// lost acknowledgement — records them without asking the model again.
type Extractor struct {
	client  Chatter
	store   FactWriter
	opts    ExtractorOptions
	logger  *slog.Logger
	m       *extractMetrics
	answers *Answers
}

// NewExtractor returns an Extractor asking client and writing to store.
// logger may be nil.
func NewExtractor(client Chatter, store FactWriter, opts ExtractorOptions, logger *slog.Logger) *Extractor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxPerUser <= 0 {
		opts.MaxPerUser = 200
	}
	answers := opts.Answers
	if answers == nil {
		answers = NewAnswers()
	}
	return &Extractor{client: client, store: store, opts: opts, logger: logger, m: newExtractMetrics(), answers: answers}
}

// Collectors returns the Extractor's Prometheus collectors, for the caller
// to register.
func (e *Extractor) Collectors() []prometheus.Collector {
	return append(e.m.collectors(), e.answers.c.Collectors()...)
}

const extractPrompt = `You extract durable facts a user states about themselves from their chat messages.
Only facts the user states about themselves or their life; nothing the assistant said, no questions, no small talk, no guesses.
Types: profile (name, city, job, diet...), preference, goal, limit (budgets, allergies, constraints), decision, relationship, event.
key: a short snake_case subject that stays the same when the value changes (e.g. "city", "diet", "savings_goal", "partner_name").
value: the fact in a short phrase, keeping amounts, dates and names verbatim.
confidence: a number from 0 to 1.
Reply with JSON only, exactly: {"facts": [{"type": string, "key": string, "value": string, "confidence": number}]}. Reply {"facts": []} when there are none.`

// AfterSave extracts facts from the user messages of ex and upserts the
// valid ones (it implements record.Hook through AfterSaveBatch). It returns an error only when
// the store fails to record a valid fact, so the worker retries.
func (e *Extractor) AfterSave(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error {
	return e.AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res})
}

// batchCalls bounds the model calls one AfterSaveBatch has in flight.
const batchCalls = 4

// AfterSaveBatch does what AfterSave does for each exchange of a batch (it
// implements record.Hook), asking the model about up to 4 questions at a
// time, then recording their facts in the exchanges' order, so a later
// statement still supersedes an earlier one. An exchange asks about its
// turn, and about each user message its save revised (res.Revised: an
// edit of an old message, stored in its place) on its own, so the facts
// of the new text are stated in that message, when it was said, and go
// with it when it is edited again. A question the model answered before
// (answers) is not asked again. A turn of several stored user messages
// (CoalesceTurns merges a conversation's turns of a round) has its facts
// stated in the newest and covering the others (memory.Fact.Covers): when
// one of them is no longer live — its conversation deleted and started
// again under the same name between the two turns, or an edit — each
// message is asked about on its own instead, so the facts of the live
// ones are kept and those of the others are not written.
func (e *Extractor) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	var qs []asked
	for i, ex := range exs {
		if results[i].Duplicate || results[i].Dropped {
			continue
		}
		if input := question(ex.Turn); input != "" {
			qs = append(qs, asked{ex: i, input: input, source: statedIn(results[i]), covers: covered(results[i]), at: ex.At})
		}
		for _, m := range results[i].Revised {
			if input := question([]memory.Message{m}); input != "" {
				qs = append(qs, asked{ex: i, input: input, source: m.Key, at: m.CreatedAt})
			}
		}
	}
	errs := e.answerAndRecord(ctx, exs, results, qs)
	var split []asked
	for k, err := range errs {
		if errors.Is(err, memory.ErrConflict) && qs[k].covers != nil {
			errs[k] = nil
			split = append(split, oneByOne(results[qs[k].ex], qs[k].ex)...)
		}
	}
	return errors.Join(append(errs, e.answerAndRecord(ctx, exs, results, split)...)...)
}

// answerAndRecord asks the model qs (answers it answered before are
// reused) and records their facts in order; it returns each question's
// recording error.
func (e *Extractor) answerAndRecord(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult, qs []asked) []error {
	// The answers are kept only if no erasure of their user came since
	// the batch was read (Answers.Forget ran before the Put: see
	// cache.PutSince): the enricher's round carries the epoch it took
	// before it read the batch from the queue (cache.WithEpoch).
	epoch := cache.EpochOf(ctx)
	sem := make(chan struct{}, batchCalls)
	var wg sync.WaitGroup
	for k := range qs {
		q := &qs[k]
		q.key = e.answerKey(exs[q.ex], q.input)
		if facts, ok := e.answers.c.Get(q.key); ok {
			e.m.runs.WithLabelValues("reused").Inc()
			q.facts = facts
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			q.facts, q.err = e.ask(ctx, exs[q.ex], results[q.ex].GuardSince, q.input)
		}()
	}
	wg.Wait()
	errs := make([]error, len(qs))
	for k, q := range qs {
		if q.err != nil {
			errs[k] = q.err // not asked: the round is retried
			continue
		}
		if q.facts != nil {
			// Kept before it is recorded: a round that cannot record it
			// now (the store failed, the round was fenced) or cannot
			// acknowledge it is redone without paying for it again.
			e.answers.c.PutSince(epoch, q.key, q.facts)
		}
		errs[k] = e.record(ctx, exs[q.ex], q, results[q.ex].GuardSince)
	}
	return errs
}

// asked is one question AfterSaveBatch puts to the model about exchange
// exs[ex]: its user text input, the message its facts are stated in
// (source, "" for none), the other stored messages they may come from
// (covers, nil for none) and when (at; zero: the exchange's time, else
// now), with the answer's key and the facts answered.
type asked struct {
	ex     int
	input  string
	source string
	covers []string
	at     time.Time
	key    answerKey
	facts  []memory.Fact
	err    error // asking failed for want of knowing whether its user was erased
}

// erasedSince returns Calls.Do's check of whether ex's user was erased
// since ex was captured: at or after guard (ex's time when zero), by the
// store's record (opts.Erased); nil when there is none to ask.
func (e *Extractor) erasedSince(ex memory.Exchange, guard time.Time) func(context.Context) (bool, error) {
	if e.opts.Erased == nil {
		return nil
	}
	since := cmp.Or(guard, ex.At)
	return func(ctx context.Context) (bool, error) {
		at, err := e.opts.Erased(ctx, ex.Tenant, ex.User)
		if err != nil {
			return false, err
		}
		return !at.IsZero() && (since.IsZero() || !at.Before(since)), nil
	}
}

// covered returns the keys of the user messages res stored that a
// question about its whole turn may take facts from, when there are
// several (nil otherwise: Source alone names them).
func covered(res memory.SaveResult) []string {
	var keys []string
	for _, m := range res.Stored {
		if m.Role == "user" && !m.Failed() && strings.TrimSpace(m.Content) != "" {
			keys = append(keys, m.Key)
		}
	}
	if len(keys) < 2 {
		return nil
	}
	return keys
}

// oneByOne returns the questions about each user message res stored, on
// its own, stated in it when it was said: what a question about the whole
// turn of exchange ex becomes when one of its messages is no longer live.
func oneByOne(res memory.SaveResult, ex int) []asked {
	var qs []asked
	for _, m := range res.Stored {
		if m.Role != "user" || m.Failed() {
			continue
		}
		if input := question([]memory.Message{m}); input != "" {
			qs = append(qs, asked{ex: ex, input: input, source: m.Key, at: m.CreatedAt})
		}
	}
	return qs
}

// maxExtractBytes bounds the user text of one exchange sent to the fact
// extraction model: its first 16 KiB, as pin detection reads (enrich).
const maxExtractBytes = 16 << 10

// question returns the user text of msgs (an exchange's turn, or a
// message its save revised) the model is asked about: its user messages
// that did not fail, control tokens quoted (memory.QuoteControlTokens),
// the first 16 KiB of them; "" when there is none.
func question(msgs []memory.Message) string {
	var user []string
	for _, m := range msgs {
		if m.Role == "user" && !m.Failed() && strings.TrimSpace(m.Content) != "" {
			user = append(user, strings.TrimSpace(m.Content))
		}
	}
	// A pasted document is not a list of facts about the user, and the
	// side model is paid for on the operator's key. A control token
	// ("<|im_start|>system") is quoted: it would open a turn of the
	// user's choosing in a self-hosted model's prompt.
	return memory.Truncate(memory.QuoteControlTokens(strings.Join(user, "\n")), maxExtractBytes)
}

// ask asks the model which facts input (the question of exchange ex,
// captured under the erasure guard guard) states and returns the valid
// ones, never nil; failures and invalid replies are counted and logged,
// and yield nil. The question is not asked once ex's user was erased
// since it was read (opts.Calls), and their erasure cancels it in
// flight: it yields nil. A call refused or cancelled only because
// erasures may have been missed (cache.ErrCleared: an erasure notice
// subscription lost) is made again unless the store records the user's
// erasure since ex was captured (opts.Erased); when it cannot be made
// (the store check failed, or clears kept cancelling it) ask returns the
// error, for the round to be retried: the facts are not dropped.
func (e *Extractor) ask(ctx context.Context, ex memory.Exchange, guard time.Time, input string) ([]memory.Fact, error) {
	exID := ex.ID
	var resp openai.ChatCompletionResponse
	err := e.opts.Calls.Do(ctx, e.erasedSince(ex, guard), func(cctx context.Context) error {
		cctx, cancel := context.WithTimeout(cctx, e.opts.Timeout)
		defer cancel()
		var err error
		resp, err = e.client.CreateChatCompletion(cctx, openai.ChatCompletionRequest{
			Model: e.opts.Model,
			Messages: []openai.ChatCompletionMessage{
				{Role: openai.ChatMessageRoleSystem, Content: extractPrompt},
				{Role: openai.ChatMessageRoleUser, Content: "User messages:\n" + input},
			},
			Temperature:    0,
			ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
		})
		return err
	}, cache.Owner{Tenant: ex.Identity.Tenant, User: ex.Identity.User})
	if errors.Is(err, cache.ErrErased) {
		e.m.runs.WithLabelValues("erased").Inc()
		return nil, nil
	}
	if errors.Is(err, cache.ErrCleared) {
		e.m.runs.WithLabelValues("cleared").Inc()
		return nil, fmt.Errorf("extract facts of %s: %w", exID, err)
	}
	if err != nil {
		e.m.runs.WithLabelValues("model_error").Inc()
		e.logger.Warn("fact extraction model failed; pattern facts only", "exchange", exID, "error", err)
		return nil, nil
	}
	if len(resp.Choices) == 0 {
		e.m.runs.WithLabelValues("bad_reply").Inc()
		e.logger.Warn("fact extraction reply has no choices", "exchange", exID)
		return nil, nil
	}
	facts, dropped, err := ParseFacts(resp.Choices[0].Message.Content)
	for reason, n := range dropped {
		e.m.dropped.WithLabelValues(reason).Add(float64(n))
	}
	if err != nil {
		e.m.runs.WithLabelValues("bad_reply").Inc()
		e.logger.Warn("fact extraction reply rejected", "exchange", exID, "error", err, "bytes", len(resp.Choices[0].Message.Content))
		return nil, nil
	}
	if len(dropped) > 0 {
		e.logger.Info("fact extraction dropped invalid items", "exchange", exID, "dropped", dropped)
	}
	e.m.runs.WithLabelValues("ok").Inc()
	if facts == nil {
		facts = []memory.Fact{}
	}
	return facts, nil
}

// record upserts the facts asked of ex in q, guarded from guard (see
// memory.Fact.GuardSince), each stated in q.source at q.at (ex's time
// when zero): for a turn, the last user message its save stored
// (statedIn), for a revised message, that message. A store refuses a late
// one once that message is gone from ex's conversation. Guarded facts
// that name no stored message (a turn stored before) are not recorded: a
// store refuses a guarded fact naming no message.
func (e *Extractor) record(ctx context.Context, ex memory.Exchange, q asked, guard time.Time) error {
	facts, source := q.facts, q.source
	if len(facts) == 0 || source == "" && !guard.IsZero() {
		return nil
	}
	at := cmp.Or(q.at, ex.At)
	if at.IsZero() {
		at = time.Now()
	}
	for _, f := range facts {
		f.Tenant, f.User, f.Conversation = ex.Tenant, ex.User, ex.Conversation
		f.Mentions = 1
		f.CreatedAt, f.UpdatedAt = at, at
		f.GuardSince, f.Source, f.Covers = guard, source, q.covers
		if ttl, ok := e.opts.TTL[f.Type]; ok && ttl > 0 {
			exp := at.Add(ttl)
			f.ExpiresAt = &exp
		}
		if _, err := e.store.UpsertFact(ctx, f, e.opts.MaxPerUser); err != nil {
			if errors.Is(err, memory.ErrErased) {
				return nil // the user was erased since ex was captured: nothing of it is kept
			}
			if errors.Is(err, memory.ErrConflict) && q.covers != nil {
				return err // a message it covers is gone: its messages are asked about one by one
			}
			e.m.runs.WithLabelValues("store_error").Inc()
			return fmt.Errorf("extract facts of %s: upsert: %w", ex.ID, err)
		}
	}
	e.m.stored.Add(float64(len(facts)))
	return nil
}

// statedIn is the key of the message the facts of a save are recorded as
// stated in (memory.Fact.Source): the last user message it stored, "" when
// it stored none (the turn was stored before).
func statedIn(res memory.SaveResult) string {
	for i := len(res.Stored) - 1; i >= 0; i-- {
		if m := res.Stored[i]; m.Role == "user" && !m.Failed() {
			return m.Key
		}
	}
	return ""
}

// extracted is one item of an extraction reply.
type extracted struct {
	Type       string   `json:"type"`
	Key        string   `json:"key"`
	Value      string   `json:"value"`
	Confidence *float64 `json:"confidence"`
}

// ParseFacts validates an extraction reply: a JSON object {"facts": [...]}
// or a bare array of {type, key, value, confidence}, optionally in a
// Markdown code fence. A reply that is not such JSON (or over 64 KiB) is an
// error and yields no facts. Otherwise each item is kept or dropped on its
// own, dropped counts returned by reason: "type" (not one of the fact
// types), "empty" (blank key or value), "confidence" (missing or outside
// [0, 1]), "oversized" (key over 64 or value over 300 characters),
// "too_many" (items past the 20th). Keys are normalised to lower-case
// snake_case.
func ParseFacts(reply string) ([]memory.Fact, map[string]int, error) {
	if len(reply) > maxReplyBytes {
		return nil, nil, fmt.Errorf("reply of %d bytes exceeds %d", len(reply), maxReplyBytes)
	}
	s := strings.TrimSpace(reply)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	var items []json.RawMessage
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal([]byte(s), &items); err != nil {
			return nil, nil, fmt.Errorf("reply is not a JSON array of facts: %w", err)
		}
	} else {
		var obj struct {
			Facts *[]json.RawMessage `json:"facts"`
		}
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return nil, nil, fmt.Errorf("reply is not JSON: %w", err)
		}
		if obj.Facts == nil {
			return nil, nil, fmt.Errorf("reply has no facts array")
		}
		items = *obj.Facts
	}
	dropped := map[string]int{}
	var out []memory.Fact
	for i, raw := range items {
		if i >= MaxExtracted {
			dropped["too_many"] += len(items) - MaxExtracted
			break
		}
		var x extracted
		if err := json.Unmarshal(raw, &x); err != nil {
			dropped["malformed"]++
			continue
		}
		f, reason := validFact(x)
		if reason != "" {
			dropped[reason]++
			continue
		}
		out = append(out, f)
	}
	if len(dropped) == 0 {
		dropped = nil
	}
	return out, dropped, nil
}

// validFact checks one extracted item, returning the drop reason if invalid.
func validFact(x extracted) (memory.Fact, string) {
	typ := memory.FactType(strings.ToLower(strings.TrimSpace(x.Type)))
	if !typ.Valid() {
		return memory.Fact{}, "type"
	}
	key, value := NormalizeFactKey(x.Key), strings.TrimSpace(x.Value)
	if key == "" || value == "" {
		return memory.Fact{}, "empty"
	}
	if utf8.RuneCountInString(key) > MaxFactKey || utf8.RuneCountInString(value) > MaxFactValue {
		return memory.Fact{}, "oversized"
	}
	if x.Confidence == nil || !(*x.Confidence >= 0 && *x.Confidence <= 1) {
		return memory.Fact{}, "confidence"
	}
	return memory.Fact{Type: typ, Key: key, Value: value, Confidence: *x.Confidence}, ""
}

// NormalizeFactKey lower-cases key and joins its words with underscores
// ("Savings Goal" → "savings_goal").
func NormalizeFactKey(key string) string { return strings.Join(tokenize(key), "_") }

// extractMetrics count extraction outcomes.
type extractMetrics struct {
	runs    *prometheus.CounterVec
	dropped *prometheus.CounterVec
	stored  prometheus.Counter
}

func newExtractMetrics() *extractMetrics {
	return &extractMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_fact_extraction_runs_total",
			Help: "Model fact extractions by outcome (ok: a valid reply; model_error, bad_reply; store_error: its facts not recorded; reused: an earlier answer to the same question recorded, no model asked; erased: not asked, or cancelled, for the user was erased since the question was read).",
		}, []string{"outcome"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_fact_extraction_dropped_total",
			Help: "Extracted fact items dropped by validation, by reason.",
		}, []string{"reason"}),
		stored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_fact_extraction_stored_total",
			Help: "Extracted facts upserted.",
		}),
	}
}

func (m *extractMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.runs, m.dropped, m.stored}
}
