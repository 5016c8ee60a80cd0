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
	// DeleteConversation removes a conversation and everything in it, or memory.ErrNotFound.
	DeleteConversation(ctx context.Context, id memory.Identity) error
	// DeleteUser erases everything stored about a user in a tenant and records
	// the erasure time, so captures of that user queued before it are dropped.
	DeleteUser(ctx context.Context, tenant, user string) error
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Queue is the contract of a durable capture queue (the SQLite outbox, Redis Streams).
type Queue interface {
	// Enqueue durably appends a payload.
	Enqueue(ctx context.Context, payload []byte) error
	// Claim returns up to max deliveries for consumer: first entries that another
	// consumer claimed more than staleAfter ago without acknowledging them,
	// then new ones, waiting up to block for any to arrive.
	Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error)
	// Ack removes delivered entries for good.
	Ack(ctx context.Context, ids ...string) error
	// Pending reports how many entries are enqueued or claimed but not acknowledged.
	Pending(ctx context.Context) (int64, error)
}
