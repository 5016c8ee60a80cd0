package recall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/seen"
)

// The kinds of memory items.
const (
	KindMessage = "message"
	KindSummary = "summary"
	KindFact    = "fact"
)

// IndexStore is what the Indexer reads and writes.
type IndexStore interface {
	// AddItems upserts items by (tenant, user, kind, ref, chunk).
	AddItems(ctx context.Context, items []memory.Item) error
	// itemEmbedder is Backfill's write.
	itemEmbedder
	// IndexBacklog keeps what an exchange's bound on indexing left for
	// later rounds.
	IndexBacklog
	// LatestSummary returns the conversation's newest summary or memory.ErrNotFound.
	LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
	FactReader
	// Conversation returns the conversation's live messages (used to find
	// the keys of a redelivered exchange's messages).
	Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error)
	// ErasedAt returns when the user was last erased (zero: never), so
	// that nothing of a user erased since their exchanges were stored is
	// embedded: its vectors would fill the embedding cache the erasure
	// emptied, for writes the store refuses.
	ErasedAt(ctx context.Context, tenant, user string) (time.Time, error)
}

// Indexer is the capture hook that makes a stored exchange recallable: its
// user and assistant turns, the conversation's latest summary and the
// user's freshly stated facts become embedded memory items.
type Indexer struct {
	store  IndexStore
	emb    OwnedEmbedder
	logger *slog.Logger
	// summaries remembers the summary versions this process indexed, so an
	// unchanged summary is not embedded and written again for every exchange.
	summaries seen.Set
	// Window, when set, is how much of a text emb reads: a message longer
	// than that is indexed in runs of a few sentences it reads whole, so a
	// word past the window still reaches the vector search (nil: messages
	// are cut as Chunk cuts them).
	Window *Window
	// deferred are the items a user's embedding budget left without a
	// vector (userEmbedBytes), for Backfill (UseDeferred).
	deferred *Deferred
	// indexUnits, when positive, replaces exchangeIndexUnits (and a
	// quarter of it backlogIndexUnits): set by tests only.
	indexUnits int
	// backlogCut counts the chunks the index backlog's rounds have cut,
	// kept or not: the work a round does besides writing what it keeps.
	backlogCut atomic.Int64
}

// NewIndexer returns an Indexer writing to store with vectors from emb.
// logger may be nil.
func NewIndexer(store IndexStore, emb Embedder, logger *slog.Logger) *Indexer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Indexer{store: store, emb: owning(emb), logger: logger, summaries: seen.Set{Max: 4096}, deferred: NewDeferred()}
}

// UseDeferred makes ix keep the items it leaves for Backfill in d (one an
// erasure reaches: Deferred.Forget) in place of its own. Call it before ix
// is used.
func (ix *Indexer) UseDeferred(d *Deferred) { ix.deferred = d }

// AfterSave indexes what storing ex added (it implements record.Hook through AfterSaveBatch):
//   - each user and assistant message stored for ex, as kind "message" items
//     with Ref its message key (memory.Key(ex.ID, i)), chunked on sentence
//     boundaries when long; tool results, tool-call-only turns and empty
//     text are skipped; the chunks indexed are bounded per exchange
//     (exchangeIndexUnits: each message's first chunks, newest message
//     first; the rest recorded in the store's index backlog, which later
//     rounds index: IndexBacklog); the chunks embedded are bounded per
//     message (embeddedChunks) and per user of a batch (userEmbedBytes,
//     newest message first), the rest stored without a vector (what only
//     the user's bound left waits for Backfill);
//   - the conversation's latest summary, kind "summary", Ref
//     "<conversation>:v<version>", unless this process indexed that version
//     already or the extractive summariser wrote it (its lines are the
//     messages' sentences, indexed as theirs);
//   - the user's current facts updated at or after ex.At (the ones this
//     exchange's hooks stated), kind "fact", Ref the fact id.
//
// Every item is dated (CreatedAt and SaidAt) by when its source was said:
// a message's CreatedAt (the time a client supplied for imported history),
// else ex.At; a fact's own time; a summary's time, except that its SaidAt
// is when the newest message of the batch in its conversation was said
// when that is earlier (the summary of imported or dated history is as of
// that history's date, not of the day it was imported).
//
// It is idempotent: items are upserted by (kind, ref, chunk), and a
// redelivered exchange (res.Duplicate) finds its message keys in the store.
// An embedding or store failure is returned so the capture worker retries.
func (ix *Indexer) AfterSave(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error {
	return ix.AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res})
}

// AfterSaveBatch indexes a batch of stored exchanges as AfterSave does each
// (it implements record.Hook), reading each conversation's summary and
// each user's facts once, with one embedding call and one store write for
// the whole batch. A user's exchanges in the batch (an import's, a
// backlog's) share one embedding budget (userEmbedBytes), spent on the
// newest first. Exchanges dropped because their user was erased are
// skipped.
func (ix *Indexer) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	return ix.index(ctx, exs, results, indexMessages|indexDerived)
}

// indexParts are the parts of what AfterSaveBatch indexes.
type indexParts uint8

const (
	// indexMessages: each exchange's stored messages.
	indexMessages indexParts = 1 << iota
	// indexDerived: what the side hooks derived from the exchanges (the
	// conversation's latest summary, the user's fresh facts).
	indexDerived
)

// IndexPart is a hook (record.Hook, through AfterSaveBatch) that indexes
// one part of what the Indexer indexes: Messages, or Derived.
type IndexPart struct {
	ix    *Indexer
	parts indexParts
}

// Messages returns the hook that indexes only a batch's stored messages,
// as AfterSaveBatch does, and not what hooks derive from them: the
// enricher's index lane, which never waits for a side model, while
// Derived runs after the side hooks (enrich.EnrichOptions.Side). The two
// index together what AfterSaveBatch does, each message once.
func (ix *Indexer) Messages() IndexPart { return IndexPart{ix: ix, parts: indexMessages} }

// Derived returns the hook that indexes only what the hooks before it
// derived from a batch — the conversations' latest summaries, the users'
// facts updated since the exchanges — as AfterSaveBatch does, and not the
// batch's messages (see Messages).
func (ix *Indexer) Derived() IndexPart { return IndexPart{ix: ix, parts: indexDerived} }

// AfterSaveBatch indexes p's part of the batch.
func (p IndexPart) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	return p.ix.index(ctx, exs, results, p.parts)
}

// index indexes parts of a batch (see AfterSaveBatch).
func (ix *Indexer) index(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult, parts indexParts) error {
	messages, derived := parts&indexMessages != 0, parts&indexDerived != 0
	// Before anything is read (Deferred.push): the enricher's round
	// carries the epoch it took before it read the batch (cache.WithEpoch).
	deferEpoch := cache.EpochOf(ctx)
	var (
		items, textOnly []memory.Item
		// later are the textOnly items only their user's budget left
		// without a vector: Backfill embeds them (on the rows still
		// stored then), unless their user was erased since (their
		// erasure guard).
		later []memory.Item
		// cut are each user's messages of the batch, cut for indexing,
		// in the order they were stored.
		cut   = map[userKey][]cutMessage{}
		convs []memory.Identity
		users []userKey
		since = map[userKey]time.Time{}
		// guard is the erasure guard of each user's writes (the earliest
		// SaveResult.GuardSince of theirs; zero: none).
		guard = map[userKey]time.Time{}
		// backlog are the messages the bound on an exchange's indexing
		// left indexed in part, for later rounds.
		backlog []memory.PendingIndex
		seen    = map[memory.Identity]bool{}
		// latest is when the newest message of each conversation in the
		// batch was said: the time its summary is as of.
		latest = map[memory.Identity]time.Time{}
		now    = time.Now()
	)
	for i, ex := range exs {
		if results[i].Dropped {
			continue
		}
		ex, err := ix.relocated(ctx, ex)
		if err != nil {
			return fmt.Errorf("index exchange %s: %w", ex.ID, err)
		}
		msgs, err := ix.storedMessages(ctx, ex, results[i])
		if err != nil {
			return fmt.Errorf("index exchange %s: %w", ex.ID, err)
		}
		at := ex.At
		if at.IsZero() {
			at = now
		}
		u := userKey{ex.Tenant, ex.User}
		var mine []cutMessage
		for _, m := range msgs {
			if (m.Role != "user" && m.Role != "assistant") || m.Failed() {
				continue // a reply the upstream broke off is never recalled
			}
			created := m.CreatedAt
			if created.IsZero() {
				created = at
			}
			if created.After(latest[ex.Identity]) {
				latest[ex.Identity] = created
			}
			if !messages {
				continue
			}
			// A long message, the user's or the assistant's, is cut to the
			// embedder's window, so that what was said in passing far
			// into it is found by its meaning.
			text := strings.TrimSpace(indexableText(m))
			chunks, embedded := ix.Window.chunks(text)
			mine = append(mine, cutMessage{id: ex.Identity, exAt: at, key: m.Key, at: created, chunks: chunks, total: len(chunks),
				bytes: len(m.Content), embedded: embedded, embeddable: embedded, text: text})
		}
		// What one exchange adds to the full-text index is bounded (see
		// exchangeIndexUnits); the rest of its text waits in the store's
		// index backlog for later rounds (IndexBacklog).
		if left := withinIndexBudget(mine, ix.exchangeUnits(), messageIndexFloor); messages && left > 0 {
			ix.logger.Info("long exchange indexed in part: the rest waits for the enricher's idle rounds",
				"exchange", ex.ID, "chunks_not_indexed", left)
			for i := len(mine) - 1; i >= 0; i-- { // newest first, as indexed
				if m := mine[i]; len(m.chunks) < m.total {
					// Later rounds cut on from the end of the last chunk kept.
					off := 0
					if ends := chunkEnds(m.text, m.chunks); len(ends) > 0 {
						off = ends[len(ends)-1]
					}
					backlog = append(backlog, memory.PendingIndex{Identity: m.id, Key: m.key, Chunk: len(m.chunks), Offset: off, Bytes: m.bytes})
				}
			}
		}
		cut[u] = append(cut[u], mine...)
		if at.After(latest[ex.Identity]) {
			latest[ex.Identity] = at
		}
		if !seen[ex.Identity] {
			seen[ex.Identity] = true
			convs = append(convs, ex.Identity)
		}
		if first, ok := since[u]; !ok {
			users = append(users, u)
			since[u] = at
		} else if at.Before(first) {
			since[u] = at
		}
		if g, ok := guard[u]; !ok || !results[i].GuardSince.IsZero() && (g.IsZero() || results[i].GuardSince.Before(g)) {
			guard[u] = results[i].GuardSince
		}
	}
	// A user erased since the batch was stored gets nothing indexed: the
	// store would refuse every write, and what was embedded for them
	// would stay in the embedding cache their erasure emptied.
	gone := map[userKey]bool{}
	for _, u := range users {
		if guard[u].IsZero() {
			continue
		}
		at, err := ix.store.ErasedAt(ctx, u.tenant, u.user)
		if err != nil {
			return fmt.Errorf("index exchanges of user %s: check erasure: %w", u.user, err)
		}
		gone[u] = erasedSince(at, guard[u])
	}
	users = slices.DeleteFunc(users, func(u userKey) bool { return gone[u] })
	convs = slices.DeleteFunc(convs, func(id memory.Identity) bool { return gone[userKey{id.Tenant, id.User}] })
	backlog = slices.DeleteFunc(backlog, func(p memory.PendingIndex) bool { return gone[userKey{p.Tenant, p.User}] })
	// Each user's messages share one budget, spent on the newest
	// exchanges first. A round of enrichment orders the batch by
	// conversation name, so a user's exchanges are ordered by when they
	// were said: a live turn goes before the history imported into a
	// conversation whose name sorts after its own.
	for _, u := range users {
		msgs := cut[u]
		slices.SortStableFunc(msgs, func(a, b cutMessage) int { return a.exAt.Compare(b.exAt) })
		withinBudget(msgs, userEmbedBytes, ix.embedCost)
		embedded, unembedded, waiting := ix.messageItems(msgs)
		items, textOnly, later = append(items, embedded...), append(textOnly, unembedded...), append(later, waiting...)
	}
	var summaryKeys []string
	if !derived {
		convs, users = nil, nil // no summaries nor facts to index
	}
	for _, id := range convs {
		sum, err := ix.store.LatestSummary(ctx, id)
		switch {
		case err == nil:
			ref := fmt.Sprintf("%s:v%d", sum.Conversation, sum.Version)
			key := id.Tenant + "\x00" + id.User + "\x00" + ref + "\x00" + strconv.FormatInt(sum.CreatedAt.UnixNano(), 10)
			if ix.summaries.Has(key) {
				continue
			}
			summaryKeys = append(summaryKeys, key)
			if sum.Summariser == memory.SummariserExtractive {
				// Its lines are the messages' own sentences, indexed
				// already: as passages they only repeat them (and
				// crowded recall out of long conversations).
				continue
			}
			for i, c := range Chunk(sum.Text) {
				it := ix.item(id, KindSummary, ref, i, c, sum.CreatedAt)
				if l := latest[id]; !l.IsZero() && l.Before(it.SaidAt) {
					it.SaidAt = l // summarised history imported or dated in the past
				}
				items = append(items, it)
			}
		case !errors.Is(err, memory.ErrNotFound):
			return fmt.Errorf("index conversation %s: load summary: %w", id.Conversation, err)
		}
	}
	for _, u := range users {
		facts, err := ix.store.Facts(ctx, u.tenant, u.user, now, false)
		if err != nil {
			return fmt.Errorf("index facts of user %s: %w", u.user, err)
		}
		for _, f := range facts {
			if f.UpdatedAt.Before(since[u]) {
				continue
			}
			items = append(items, ix.factItem(f))
		}
	}
	for _, its := range [][]memory.Item{items, textOnly, later} {
		for i := range its {
			its[i].GuardSince = guard[userKey{its[i].Tenant, its[i].User}]
		}
	}
	for i := range backlog {
		backlog[i].GuardSince = guard[userKey{backlog[i].Tenant, backlog[i].User}]
	}
	if err := ix.add(ctx, items); err != nil {
		return fmt.Errorf("index %d exchanges: %w", len(exs), err)
	}
	if err := ix.addTextOnly(ctx, textOnly); err != nil {
		return fmt.Errorf("index %d exchanges: %w", len(exs), err)
	}
	if len(backlog) > 0 {
		if err := ix.store.DeferIndex(ctx, backlog); err != nil {
			return fmt.Errorf("index %d exchanges: defer %d messages: %w", len(exs), len(backlog), err)
		}
	}
	if n := ix.deferred.push(deferEpoch, later); n > 0 {
		ix.logger.Warn("items left without a vector until gateway reindex", "items", n)
	}
	for _, key := range summaryKeys {
		ix.summaries.Add(key)
	}
	return nil
}

// IndexFact makes one fact searchable (used when a fact is added through the
// management API).
func (ix *Indexer) IndexFact(ctx context.Context, f memory.Fact) error {
	if err := ix.add(ctx, []memory.Item{ix.factItem(f)}); err != nil {
		return fmt.Errorf("index fact %d: %w", f.ID, err)
	}
	return nil
}

func (ix *Indexer) factItem(f memory.Fact) memory.Item {
	it := ix.item(memory.Identity{Tenant: f.Tenant, User: f.User, Conversation: f.Conversation},
		KindFact, strconv.FormatInt(f.ID, 10), 0, FactText(f), f.UpdatedAt)
	return it
}

func (ix *Indexer) item(id memory.Identity, kind, ref string, chunk int, text string, at time.Time) memory.Item {
	return memory.Item{
		Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
		Kind: kind, Ref: ref, Chunk: chunk, Text: text,
		Model: ix.emb.Model(), Dims: ix.emb.Dims(), CreatedAt: at, SaidAt: at,
	}
}

// embeddedChunks is how many chunks of one message are embedded. The
// rest of a longer message (a pasted document, a hostile 2 MiB body) is
// stored without a vector: full text and the lexicon still find every
// chunk, but embedding stays bounded per message (about 4,800 tokens, a
// fraction of a CPU-second with the built-in encoder) instead of growing
// with the body. `gateway reindex` embeds them when an operator asks.
const embeddedChunks = 16

// userEmbedBytes bounds what the messages of one user's exchanges in a
// batch (one AfterSaveBatch: a round of enrichment) have embedded: the
// bytes of the chunks embedded, each counted with itemEmbedBytes more. A
// first request that resends a long history (up to the 2 MiB body limit:
// thousands of messages, each under the per-message bound) would
// otherwise have every message embedded, minutes of the encoder's time
// (about 90 ms of CPU a KB of English on the shared 2-core machine: 165
// CPU-seconds for 4,000 messages, 1.8 MB), ahead of every other user's
// indexing. So would an import (up to 1,000 messages, 8 MiB, stored as
// hundreds of exchanges, up to 256 of which a round of enrichment takes
// together) were the bound per exchange: 200 messages of 1 KB took 21
// CPU-seconds. 32 KiB is 2–4 CPU-seconds there, about issue 24's bound of
// 3 on what one request may cost, and holds four messages at the
// encoder's per-message bound (embeddedRuns, about 8 KB each), so an
// ordinary exchange (a question and a reply of a few KB, even a pasted
// page and its answer) is embedded whole, and so is a round of live
// turns, which rarely holds two of one user's. It is spent newest message
// first (the newest turns matter most to recall; a live turn before the
// same user's imported history); the older messages are stored text-only
// as a long message's tail is: full text finds them at once, and Backfill
// embeds them when the enricher is idle (`gateway reindex`, those a
// restart left).
const userEmbedBytes = 32 << 10

// itemEmbedBytes is what userEmbedBytes counts for each text embedded
// besides its bytes: the encoder's cost of a one-word text (its pieces
// marking the start and end, the pooling and projection: about 1.2 ms, as
// much as 14 bytes of English), so a history of two-letter messages has
// about 1,800 of them embedded, not 16,000.
const itemEmbedBytes = 16

// embedPieceBytes is what userEmbedBytes counts at least for each piece
// the embedder reads of a text (its Window's pieces, up to Window.Max),
// when that is more than the text's bytes: the built-in encoder's work is
// by the piece, and English takes about 4.4 bytes a piece, which the
// budget's CPU-seconds were measured on, where random letters, digits
// and punctuation take one or two. Counted by bytes alone, 32 KiB of
// 150-byte messages of random words cost about 7 CPU-seconds, three
// times as much as English.
const embedPieceBytes = 4

// cutMessage is one message of an exchange cut for indexing: its
// conversation, when its exchange was said, its key, when it was said, its
// chunks in order from the from-th of all total, and how many of the first
// are embedded.
type cutMessage struct {
	id     memory.Identity
	exAt   time.Time
	key    string
	at     time.Time
	chunks []string
	from   int
	total  int
	// bytes is the length of the message's text.
	bytes    int
	embedded int
	// embeddable is how many of the first chunks the per-message bound
	// (embeddedChunks) lets be embedded: those past embedded were left
	// text-only by their user's budget alone.
	embeddable int
	// text is the message's indexable text, trimmed, which its chunks
	// were cut from (set when the message is cut whole).
	text string
	// rest, when set, cuts the message's chunks as they are indexed:
	// chunks holds those cut so far (see cutMore).
	rest *resumedCut
}

// cutMore cuts m's next chunks when it is cut as it is indexed (m.rest),
// and reports whether it cut any. They are stored without a vector,
// those the message's bound on vectors lets be embedded counted in
// embeddable, for Backfill.
func (m *cutMessage) cutMore() bool {
	if m.rest == nil {
		return false
	}
	cs, embedded := m.rest.next()
	if len(cs) == 0 {
		return false
	}
	if m.embeddable == len(m.chunks) {
		m.embeddable += embedded
	}
	m.chunks = append(m.chunks, cs...)
	return true
}

// embedCost is what embedding chunk costs against userEmbedBytes: its
// length, or embedPieceBytes for each piece the embedder reads of it
// (ix.Window) when that is more, plus itemEmbedBytes.
func (ix *Indexer) embedCost(chunk string) int {
	n := len(chunk)
	if w := ix.Window; w != nil {
		n = max(n, embedPieceBytes*min(w.Pieces(chunk), w.Max))
	}
	return n + itemEmbedBytes
}

// withinBudget lowers the embedded counts of msgs (a user's messages of a
// batch, oldest first) so that the chunks left embedded cost at most budget
// (each what cost says), spent newest message first and, within a
// message, on its first chunks: from the first chunk that does not fit,
// that message's later chunks and every older message's are left
// text-only. A chunk's cost is asked for only while budget is left.
func withinBudget(msgs []cutMessage, budget int, cost func(chunk string) int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		for k, c := range m.chunks[:m.embedded] {
			if budget == 0 {
				m.embedded = k
				break
			}
			n := cost(c)
			if n > budget {
				m.embedded, budget = k, 0
				break
			}
			budget -= n
		}
	}
}

// messageItems returns the items of msgs' chunks: those embedded, those
// stored without a vector, and of these the ones a budget alone left
// without one (for Backfill: see cutMessage.embeddable).
func (ix *Indexer) messageItems(msgs []cutMessage) (items, textOnly, later []memory.Item) {
	for _, m := range msgs {
		for i, c := range m.chunks {
			it := ix.item(m.id, KindMessage, m.key, m.from+i, c, m.at)
			if i >= m.embedded {
				textOnly = append(textOnly, it)
				if i < m.embeddable {
					later = append(later, it)
				}
				continue
			}
			items = append(items, it)
		}
	}
	return items, textOnly, later
}

// maxDeferredBytes bounds the text of the items kept for Backfill, each
// counted with deferredItemBytes more (about 22,000 messages of 500
// bytes), and a tenant's at a quarter of it, so one tenant resending long
// histories leaves room for the others; past them, `gateway reindex`
// embeds what is left.
const (
	maxDeferredBytes       = 16 << 20
	maxTenantDeferredBytes = maxDeferredBytes / 4
)

// deferredItemBytes is what maxDeferredBytes counts for an item besides
// its text: the rest of a memory.Item.
const deferredItemBytes = 256

// backfillBatch is how many deferred items one Backfill embeds: a few
// hundred milliseconds of the encoder, so a query that finds its slots
// taken waits little (see Bounded).
const backfillBatch = 16

// Deferred are the items waiting for a vector (Indexer.Backfill), in the
// order Backfill takes them, and the bytes they count against
// maxDeferredBytes, in all and by tenant. They hold their users' text: an
// erasure, or a deletion of one of the user's conversations, drops the
// user's (Forget, as cache.Reads.Forget calls it in every process the
// erasure's notice reaches), so none of it waits in memory for the
// enricher's idle time, nor goes to the embedding provider after it (the
// user's other items wait for `gateway reindex`, as those past the
// bound do). It is safe for concurrent use.
type Deferred struct {
	mu       sync.Mutex
	items    []memory.Item
	bytes    int
	byTenant map[string]int
	// erased records the forgets (Clear keeps every item): a round begun
	// before a user's forget keeps none of their items (push).
	erased cache.Erasures
}

// NewDeferred returns an empty Deferred, for Indexer.UseDeferred.
func NewDeferred() *Deferred { return &Deferred{} }

// Forget drops the items of the user of tenant (cache.Forgetter).
func (d *Deferred) Forget(tenant, user string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.erased.Forget(cache.Owner{Tenant: tenant, User: user})
	d.drop(func(it memory.Item) bool { return it.Tenant == tenant && it.User == user })
}

// Clear keeps the items. A clear comes each time the erasure notices'
// subscription starts (the first time after a process began serving, and
// on every reconnect to Redis): dropping every user's items then left
// them without a vector until `gateway reindex`. The cost: the text of a
// user erased while a notice was missed may still reach the embedder
// once; its rows are gone from the store.
func (d *Deferred) Clear() {}

// drop removes the items gone reports, with their bytes; d.mu is held.
func (d *Deferred) drop(gone func(memory.Item) bool) {
	d.items = slices.DeleteFunc(d.items, func(it memory.Item) bool {
		if !gone(it) {
			return false
		}
		d.uncount(it)
		return true
	})
	if len(d.items) == 0 {
		d.items = nil
	}
}

// uncount takes it's cost off the bytes counted; d.mu is held.
func (d *Deferred) uncount(it memory.Item) {
	cost := len(it.Text) + deferredItemBytes
	d.bytes -= cost
	if d.byTenant[it.Tenant] -= cost; d.byTenant[it.Tenant] == 0 {
		delete(d.byTenant, it.Tenant)
	}
}

// epoch returns the count of forgets, which a round of indexing reads
// before it reads what it indexes, for push.
func (d *Deferred) epoch() uint64 { return d.erased.Epoch() }

// push keeps items (a round's, oldest first), newest first, within
// maxDeferredBytes and maxTenantDeferredBytes, each with its own copy of
// its text (a chunk shares the bytes of its whole message, which may be a
// long one), and returns how many it did not keep: the oldest, past the
// bounds, and those of a user forgotten since the round began (epoch),
// which it read before the forget. Items are taken in the order they were
// kept, so a tenant's long history waits behind what others deferred
// before it.
func (d *Deferred) push(epoch uint64, items []memory.Item) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	forgotten := 0
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if d.erased.Since(cache.Owner{Tenant: it.Tenant, User: it.User}, epoch) {
			forgotten++
			continue
		}
		cost := len(it.Text) + deferredItemBytes
		if d.bytes+cost > maxDeferredBytes || d.byTenant[it.Tenant]+cost > maxTenantDeferredBytes {
			return forgotten + i + 1
		}
		if d.byTenant == nil {
			d.byTenant = map[string]int{}
		}
		it.Text = strings.Clone(it.Text)
		d.items = append(d.items, it)
		d.bytes += cost
		d.byTenant[it.Tenant] += cost
	}
	return forgotten
}

// pop takes up to n items, the first kept.
func (d *Deferred) pop(n int) []memory.Item {
	d.mu.Lock()
	defer d.mu.Unlock()
	n = min(n, len(d.items))
	out := slices.Clone(d.items[:n])
	for _, it := range out {
		d.uncount(it)
	}
	clear(d.items[:n])
	d.items = d.items[n:]
	if len(d.items) == 0 {
		d.items = nil // let a drained backlog's array go
	}
	return out
}

// Deferred is how many items wait for Backfill.
func (ix *Indexer) Deferred() int {
	ix.deferred.mu.Lock()
	defer ix.deferred.mu.Unlock()
	return len(ix.deferred.items)
}

// Backfill is the enricher's idle work (enrich.EnrichOptions.Idle). While
// the store's index backlog holds entries, it runs a round of it
// (IndexBacklog): the rest of a history or a message too long for one
// round of indexing becomes searchable by full text first. Else it embeds
// up to backfillBatch of the items a user's embedding budget stored
// without a vector (the older messages of a long resent or imported
// history: see userEmbedBytes), in the order they were deferred, each
// batch's newest first, and stores their vectors on the rows that still
// hold them (IndexStore.EmbedItems), leaving out, unembedded, those of a
// user erased since they were indexed (their erasure guard). It returns
// how many entries or items it took, 0 when none wait. So a long history
// is found by full text, and gets its vectors, within minutes instead of
// at the next `gateway reindex`.
//
// It never writes an item again: one whose user was erased, whose
// conversation was deleted (even when a conversation of that name was
// started since) or whose message was superseded since it was indexed is
// no longer stored, and stays so. The backlog waits in the store; the
// items waiting for a vector wait in this process's memory, at most
// maxDeferredBytes of them: after a restart, or past that bound, `gateway
// reindex` embeds the rest. An item that fails to embed stays text-only
// and is not retried.
func (ix *Indexer) Backfill(ctx context.Context) (int, error) {
	// What it embeds is read from here on: an erasure of its owner after
	// this refuses or cancels the embedding call (Cached's calls).
	ctx = cache.WithEpoch(ctx, cache.Epoch())
	if n, err := ix.IndexBacklog(ctx); n > 0 || err != nil {
		return n, err
	}
	items := ix.deferred.pop(backfillBatch)
	n := len(items)
	if n == 0 {
		return 0, nil
	}
	erasures := map[userKey]time.Time{} // each guarded user's, read once
	for _, it := range items {
		u := userKey{it.Tenant, it.User}
		if _, ok := erasures[u]; ok || it.GuardSince.IsZero() {
			continue
		}
		at, err := ix.store.ErasedAt(ctx, it.Tenant, it.User)
		if err != nil {
			return 0, fmt.Errorf("backfill: check erasure: %w", err)
		}
		erasures[u] = at
	}
	items = slices.DeleteFunc(items, func(it memory.Item) bool {
		return erasedSince(erasures[userKey{it.Tenant, it.User}], it.GuardSince)
	})
	if len(items) == 0 {
		return n, nil
	}
	if err := ix.embedByOwner(ctx, items); err != nil {
		return 0, fmt.Errorf("backfill: %w", err)
	}
	return n, nil
}

// embedByOwner embeds items and stores their vectors (embedStored). When
// the embedding call was refused or cancelled because an owner of some of
// them was erased since they were read (cache.ErrErased: the batch
// crosses users), each owner's items are embedded again on their own,
// under the same epoch: the erased owners' are refused again and stay
// unembedded, the others get their vectors.
func (ix *Indexer) embedByOwner(ctx context.Context, items []memory.Item) error {
	err := embedStored(ctx, ix.store, ix.emb, items)
	if !errors.Is(err, cache.ErrErased) {
		return err
	}
	byOwner := map[userKey][]memory.Item{}
	var owners []userKey
	for _, it := range items {
		u := userKey{it.Tenant, it.User}
		if byOwner[u] == nil {
			owners = append(owners, u)
		}
		byOwner[u] = append(byOwner[u], it)
	}
	if len(owners) < 2 {
		return nil // the one owner was erased: nothing of theirs is embedded
	}
	var errs []error
	for _, u := range owners {
		if err := embedStored(ctx, ix.store, ix.emb, byOwner[u]); err != nil && !errors.Is(err, cache.ErrErased) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// erasedSince reports whether an erasure at erased (zero: none) came at or
// after since, the erasure guard of what is being indexed
// (memory.Item.GuardSince; zero: not guarded).
func erasedSince(erased, since time.Time) bool {
	return !since.IsZero() && !erased.IsZero() && !erased.Before(since)
}

// userKey names a user of a batch or backfill.
type userKey struct{ tenant, user string }

// indexChunk is how many items one embedding call and one store write of
// the Indexer hold: a round of many exchanges (an import, a backlog)
// stores its items as it goes, so a round cut short keeps what it did.
const indexChunk = 64

// unembeddedWriteTimeout bounds storing, without vectors, the items whose
// embedding failed (see add).
const unembeddedWriteTimeout = 5 * time.Second

// add embeds items and stores them, indexChunk at a time. When embedding a
// chunk fails (the embedder is down, or too slow for the round's
// deadline), that chunk and the rest are stored without vectors, so full
// text finds them at once, and the error is returned so the round is tried
// again (an embedding cache makes the chunks already embedded free); items
// left without a vector are embedded by `gateway reindex`.
func (ix *Indexer) add(ctx context.Context, items []memory.Item) error {
	for start := 0; start < len(items); start += indexChunk {
		chunk := items[start:min(len(items), start+indexChunk)]
		vecs, err := ix.emb.EmbedOwned(ctx, itemTexts(chunk), time.Time{})
		if err != nil {
			err = fmt.Errorf("embed %d items: %w", len(chunk), err)
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unembeddedWriteTimeout)
			defer cancel()
			if werr := ix.addTextOnly(wctx, items[start:]); werr != nil {
				return errors.Join(err, werr)
			}
			return err
		}
		for i := range chunk {
			chunk[i].Embedding = vecs[i]
		}
		if err := ix.store.AddItems(ctx, chunk); err != nil {
			return fmt.Errorf("add %d items: %w", len(chunk), err)
		}
	}
	if len(items) > 0 {
		ix.logger.Debug("indexed memory items", "tenant", items[0].Tenant, "items", len(items))
	}
	return nil
}

// addTextOnly stores items without vectors, indexChunk at a time: the
// chunks of a long message past embeddedChunks, those of a user's
// exchanges past userEmbedBytes, and what add could not embed.
func (ix *Indexer) addTextOnly(ctx context.Context, items []memory.Item) error {
	for i := range items {
		items[i].Embedding, items[i].Model, items[i].Dims = nil, "", 0
	}
	for start := 0; start < len(items); start += indexChunk {
		if err := ix.store.AddItems(ctx, items[start:min(len(items), start+indexChunk)]); err != nil {
			return fmt.Errorf("add %d items without vectors: %w", len(items), err)
		}
	}
	return nil
}

// relocated returns ex in the conversation its messages live in now: an
// exchange stored in the default conversation with a candidate
// (memory.Exchange.Candidate) may have moved there by the time it is
// indexed, when its chat went on at once.
func (ix *Indexer) relocated(ctx context.Context, ex memory.Exchange) (memory.Exchange, error) {
	if ex.Candidate == "" || ex.Candidate == ex.Conversation {
		return ex, nil
	}
	to := ex.Identity
	to.Conversation = ex.Candidate
	_, live, err := ix.store.Conversation(ctx, to)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return ex, nil
	case err != nil:
		return ex, fmt.Errorf("load conversation: %w", err)
	}
	if len(memory.OfExchange(ex.ID, live)) > 0 {
		ex.Identity = to
	}
	return ex, nil
}

// storedMessages returns the messages storing ex inserted, with their keys.
// For a fresh save they are the last res.Inserted of prior, turn and reply
// (the store inserts the unseen suffix of ex.Prior, then ex.Turn, then
// ex.Reply, keyed memory.Key(ex.ID, 0..)), then the new texts of the
// messages ex edited where its requests no longer store them
// (res.Revised, keyed after them); for a duplicate they are read
// back from the store by key prefix.
func (ix *Indexer) storedMessages(ctx context.Context, ex memory.Exchange, res memory.SaveResult) ([]memory.Message, error) {
	if !res.Duplicate {
		all := make([]memory.Message, 0, len(ex.Prior)+len(ex.Turn)+1)
		all = append(append(append(all, ex.Prior...), ex.Turn...), ex.Reply)
		n := min(max(res.Inserted, 0), len(all))
		out := make([]memory.Message, n)
		for i, m := range all[len(all)-n:] {
			m.Key = memory.Key(ex.ID, i)
			out[i] = m
		}
		return append(out, res.Revised...), nil
	}
	_, live, err := ix.store.Conversation(ctx, ex.Identity)
	if err != nil {
		if errors.Is(err, memory.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("load conversation: %w", err)
	}
	return memory.OfExchange(ex.ID, live), nil
}

// indexableText is what is indexed and recalled of m: its answer, without
// the reasoning block a reply opens with (memory.Message.Answer: what the
// model thought is not what was said), less the "[tool_call ...]" lines
// memory.ParseMessage adds for tool calls: a call's arguments are not
// something the user said.
func indexableText(m memory.Message) string {
	content := m.Answer()
	if !strings.Contains(content, "[tool_call ") {
		return content
	}
	lines := strings.Split(content, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, "[tool_call ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}
