// Package storetest is the contract every memory store adapter satisfies:
// one suite, run against SQLite and PostgreSQL alike.
package storetest

import (
	"context"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Store is the whole contract of a memory store adapter, as the suite tests it.
// Consumers declare the one-to-three-method slices of it they need.
type Store interface {
	// SaveExchange stores an exchange in one transaction: it creates the
	// conversation if needed; returns Duplicate (and changes nothing) when an
	// exchange with ex.ID was stored before; returns Dropped (and changes
	// nothing) when the user was erased at or after ex.At; loads the tail of
	// the live branch, applies memory.Align(tail, ex.Prior), marks superseded
	// messages, and inserts plan.Prior, ex.Turn and ex.Reply in that order with
	// Key memory.Key(ex.ID, i) and Seq continuing the conversation.
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	// Recent returns up to n newest live messages of the conversation, oldest first.
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
	// Conversations lists a user's conversations, most recently updated first.
	Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error)
	// Conversation returns one conversation and all its live messages, or memory.ErrNotFound.
	Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error)
	// ConversationPage returns one conversation, its live message count,
	// and a page of its live messages (memory.Page), or
	// memory.ErrNotFound (testConversationPages).
	ConversationPage(ctx context.Context, id memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error)
	// DeleteConversation removes a conversation and everything in it, or
	// memory.ErrNotFound; with a Knowledge store, that includes the facts
	// (current or superseded, pinned or not) no other conversation or the
	// API stated, with their recall items (see
	// testDeleteConversationDeletesItsFacts).
	DeleteConversation(ctx context.Context, id memory.Identity) error
	// DeleteUser erases everything stored about a user in a tenant and records
	// the erasure time, so captures of that user queued before it are dropped.
	DeleteUser(ctx context.Context, tenant, user string) error
	// ErasedAt returns when the user was last erased (the zero time when
	// never), for writers that check the tombstone themselves (an import).
	// Writes carrying an erasure guard (memory.Fact.GuardSince) are checked by the store, in
	// the write's transaction: see RunErasure.
	ErasedAt(ctx context.Context, tenant, user string) (time.Time, error)
	// DeletedAt returns when a conversation was last deleted (the zero
	// time when never, or not since its user's erasure): SaveExchange
	// drops an exchange received at or before then (see
	// testDeletedConversationStaysDeleted).
	DeletedAt(ctx context.Context, id memory.Identity) (time.Time, error)
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Queue is the contract of a durable capture queue (the SQLite outbox, Redis Streams).
type Queue interface {
	// Enqueue durably appends a payload.
	Enqueue(ctx context.Context, payload []byte) error
	// EnqueueBatch durably appends payloads, in order.
	EnqueueBatch(ctx context.Context, payloads [][]byte) error
	// Claim returns up to max deliveries for consumer: first entries that another
	// consumer claimed more than staleAfter ago without acknowledging them,
	// then new ones, waiting up to block for any to arrive.
	Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error)
	// Ack removes delivered entries for good.
	Ack(ctx context.Context, ids ...string) error
	// Pending reports how many entries are enqueued or claimed but not acknowledged.
	Pending(ctx context.Context) (int64, error)
	// Oldest returns when the oldest entry enqueued or claimed but not
	// acknowledged was enqueued (the zero time: none).
	Oldest(ctx context.Context) (time.Time, error)
	// Purge deletes, claimed or not, the entries whose payload match
	// reports true, and returns how many it deleted: a purged entry is
	// never delivered again, and acknowledging it is a no-op.
	Purge(ctx context.Context, match func(payload []byte) bool) (int, error)
}

// Knowledge is the part of the contract that compaction (issue 4) and recall
// (issue 5) use: summaries, facts, recallable items and their search. Every
// call is scoped to a tenant and user inside the query.
type Knowledge interface {
	// MessagesAfter returns up to limit live messages of the conversation with
	// Seq > afterSeq, oldest first.
	MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error)
	// LatestSummary returns the newest summary version of the conversation,
	// or memory.ErrNotFound.
	LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
	// SaveSummary stores a new summary version. s.Version must be the latest
	// version + 1 (1 for the first); otherwise it returns memory.ErrConflict
	// and stores nothing, so two compactions of one conversation never both win.
	SaveSummary(ctx context.Context, s memory.Summary) error

	// UpsertFact records a statement about a user, per (tenant, user, type,
	// normalised key): the same value again raises Mentions and Confidence
	// (max of both, +0.1 capped at 1) and refreshes UpdatedAt; a different
	// value supersedes the current fact (SupersededAt = f.UpdatedAt, kept in
	// history) and becomes current. Pinned is sticky (once pinned stays
	// pinned). When the user then has more than maxPerUser current facts, the
	// least valuable unpinned ones (fewest mentions, then oldest) are deleted.
	// It returns the current fact after the upsert, or memory.ErrErased when
	// its erasure guard refuses it (RunErasure). Recall items of a fact that
	// stops being current are deleted.
	UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error)
	// Facts returns the user's current facts (not superseded, not expired at
	// now), most recently updated first; with history, superseded and expired
	// ones too.
	Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
	// DeleteFact deletes one fact of the user, or returns memory.ErrNotFound.
	DeleteFact(ctx context.Context, tenant, user string, id int64) error

	// AddItems stores recallable items; an item whose (tenant, user, kind,
	// ref, chunk) exists already is updated (text, embedding), never duplicated.
	// Items the erasure guard refuses, message items of messages no longer
	// live, and guarded items (memory.Item.GuardSince) whose message,
	// summary or fact is no longer stored as it was read, are skipped
	// (contract.ItemChecks; testLateIndexOfRecreatedConversation).
	AddItems(ctx context.Context, items []memory.Item) error
	// SearchVector ranks the user's items embedded with q.Model/q.Dims by
	// cosine similarity to q.Embedding (Score = similarity), best first.
	SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	// SearchText ranks the user's items by full-text match of q.Text (Score =
	// the engine's rank, higher is better), best first.
	SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	// ItemsToEmbed returns up to limit items with ID > afterID whose vector is
	// missing or was made by another model or dimension, in ID order, for a
	// resumable reindex.
	ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error)
	// EmbedItems stores new vectors (with model and dims) on the rows that
	// still hold items, by (tenant, user, kind, ref, chunk) and text; an
	// item no longer stored is skipped, never written again.
	EmbedItems(ctx context.Context, items []memory.Item) error

	// DeferIndex records in the index backlog the entries (conversation,
	// key, chunk, bytes) whose message is live in their conversation (of
	// the default conversation, in the one it moved to), in order, raising
	// a recorded entry's chunk (never lowering it); nothing of a user
	// erased since an entry's GuardSince. An entry goes with its message
	// (erasure, deleted conversation) and follows it (adoption).
	DeferIndex(ctx context.Context, entries []memory.PendingIndex) error
	// PendingIndex returns the backlog's oldest entries in the order
	// recorded, with ID and their messages as stored now (Gone when no
	// longer live): at most limit, and past the first only while their
	// Bytes add up to at most maxBytes.
	PendingIndex(ctx context.Context, limit, maxBytes int) ([]memory.PendingIndex, error)
	// ResolveIndex removes the entries (by ID) Done and raises the others'
	// chunk to theirs (never lowers it); an entry no longer stored is
	// skipped.
	ResolveIndex(ctx context.Context, entries []memory.PendingIndex) error
}
