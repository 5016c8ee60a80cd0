package record

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// chatStripes is how many locks ChatLocks spreads chats over.
const chatStripes = 64

// workerChatLockWait bounds how long a Worker waits for the store's lock
// on a chat (another process storing it); the Capturer waits at most
// Options.OpTimeout.
const workerChatLockWait = 30 * time.Second

// ChatLocker serializes, across every process sharing a store, the
// storing of a full-history chat's first turn and of the turns that
// continue it (implemented by the stores: a PostgreSQL advisory lock, a
// row of a SQLite file's chat locks). See ChatLocks.
type ChatLocker interface {
	// LockChats waits until no holder, in this process or another, holds
	// a lock on any of chats, then takes them all and returns what
	// releases them. It returns an error, holding nothing, when ctx ends
	// first or the store fails. A lock whose holder died is released
	// (its connection closed, or after a bound of a minute or more).
	LockChats(ctx context.Context, chats []memory.Identity) (unlock func(), err error)
}

// ChatLocks serializes the storing of a full-history chat's first turn
// (memory.Exchange.Candidate) and of the turns that continue it (Derived,
// with history: their Root, else their Conversation), wherever each is
// stored — a Capturer's lanes, a Worker, in this process or another that
// shares the store. Each of the two checks what the other stored before
// it stores (storedAhead, Adopter.Adopt) and records its candidate after;
// run together, both checks could miss the other, and the first turn
// would be stored in the default conversation and, as the resent history,
// in the continuation's branch too. Within a process, a Capturer and a
// Worker share one (Options.Chats, WorkerOptions.Chats), striped: two
// chats may wait for each other. Across processes the store's ChatLocker
// (NewChatLocks) serializes them, taken after the process's stripes, so
// of a process's stores waiting for one chat only one waits in the store
// (holding a connection, or polling). Storing holds no other lock while
// it waits.
type ChatLocks struct {
	seed    maphash.Seed
	store   ChatLocker // nil: this process only
	stripes [chatStripes]sync.Mutex
	waiting atomic.Int64 // stores waiting for a chat's lock, for tests
}

// NewChatLocks returns the chat locks of one process, serialized with
// other processes' through store's (nil: within this process only, for a
// store no other process shares).
func NewChatLocks(store ChatLocker) *ChatLocks {
	return &ChatLocks{seed: maphash.MakeSeed(), store: store}
}

// chatOf returns the chat whose first turn storing ex may store or find
// (a first turn's candidate conversation; a derived conversation a turn
// resending history continues), and false when there is none.
func chatOf(ex memory.Exchange) (memory.Identity, bool) {
	id := ex.Identity
	switch {
	case ex.Candidate != "":
		id.Conversation = ex.Candidate
	case ex.Derived && len(ex.Prior) > 0:
		if ex.Root != "" {
			id.Conversation = ex.Root
		}
	default:
		return memory.Identity{}, false
	}
	return id, true
}

// lock takes the locks of the chats of exs: the process's, in stripe
// order, then the store's, and returns what releases them. When the
// store's cannot be taken (ctx ended, the store failed) it returns the
// error with the process's locks held, released by unlock: the caller
// stores as it would have without the store's. A nil ChatLocks locks
// nothing.
func (l *ChatLocks) lock(ctx context.Context, exs ...memory.Exchange) (unlock func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	var (
		held  []int
		chats []memory.Identity
	)
	for _, ex := range exs {
		if id, ok := chatOf(ex); ok {
			held = append(held, int(maphash.Comparable(l.seed, id)%chatStripes))
			chats = append(chats, id)
		}
	}
	slices.Sort(held)
	held = slices.Compact(held)
	for _, s := range held {
		if !l.stripes[s].TryLock() {
			l.waiting.Add(1)
			l.stripes[s].Lock()
			l.waiting.Add(-1)
		}
	}
	local := func() {
		for _, s := range held {
			l.stripes[s].Unlock()
		}
	}
	if l.store == nil || len(chats) == 0 {
		return local, nil
	}
	release, err := l.store.LockChats(ctx, chats)
	if err != nil {
		return local, fmt.Errorf("lock chats in the store: %w", err)
	}
	return func() {
		release()
		local()
	}, nil
}
