package record

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memgate/memgate/internal/keylock"
	"github.com/memgate/memgate/internal/memory"
)

// workerChatLockWait bounds how long a Worker waits for a chat's locks
// (another store of the chat, in this process or another, holding them);
// the Capturer waits at most Options.OpTimeout.
const workerChatLockWait = 30 * time.Second

// ChatLocker serializes, across every process sharing a store, the
// storing of a full-history chat's first turn and of the turns that
// continue it (implemented by the stores: a PostgreSQL advisory lock, a
// row of a SQLite file's chat locks). See ChatLocks.
type ChatLocker interface {
	// LockChats waits until no holder, in this process or another, holds
	// a lock on any of chats, then takes them all and returns the hold's
	// fence and what releases them. It returns an error, holding nothing,
	// when ctx ends first or the store fails. A lock whose holder died is
	// released (its connection closed, or after a lease of a minute or
	// more, renewed while its holder lives). The store's writes that name
	// the fence (memory.Exchange.Fence, Adopter.Adopt's) commit, in their
	// own transaction, only while that very hold still holds the lock —
	// not another hold of the chat, in another process or this one — else
	// fail with memory.ErrLockLost: the Capturer and the Worker then take
	// it again (chatHold.retake) and check again before they store;
	// refused again under the lock taken again, they store without it
	// (chatHold.lostAgain). Writes naming no fence are not checked.
	LockChats(ctx context.Context, chats []memory.Identity) (fence memory.Fence, unlock func(), err error)
}

// ChatLocks serializes the storing of a full-history chat's first turn
// (memory.Exchange.Candidate) and of the turns that continue it (Derived,
// with history: their Root, else their Conversation), wherever each is
// stored — a Capturer's lanes, a Worker, in this process or another that
// shares the store. Each of the two checks what the other stored before
// it stores (storedAhead, Adopter.Adopt), and its save records its
// candidate; run together, both checks could miss the other, and the
// first turn would be stored in the default conversation and, as the
// resent history, in the continuation's branch too. The save records the
// candidate in its own transaction (memory.CandidateOf), so a holder that
// stalls after its save leaves the next holder a first turn it finds.
// Within a
// process, a Capturer and a Worker share one (Options.Chats,
// WorkerOptions.Chats), with a lock per chat: a store waits only for
// stores of its own chats, never for another tenant's or chat's. Across
// processes the store's ChatLocker (NewChatLocks) serializes them, taken
// after the process's, so of a process's stores waiting for one chat only
// one waits in the store (holding a connection, or polling). Every write
// under a hold names its fence (chatHold.fence), so the store refuses the
// writes of a hold that ended or lost its lock, whoever holds the chat
// since: the process's own lock is not what fences them. Storing holds no
// other lock while it waits.
type ChatLocks struct {
	store ChatLocker // nil: this process only
	locks keylock.Locks[memory.Identity]
}

// NewChatLocks returns the chat locks of one process, serialized with
// other processes' through store's (nil: within this process only, for a
// store no other process shares).
func NewChatLocks(store ChatLocker) *ChatLocks {
	return &ChatLocks{store: store}
}

// lock takes the locks of the chats of exs: the process's, one chat
// after another in a fixed order, then the store's, and returns them
// held. When one cannot be taken before ctx ends (a store of the same
// chat holds it that long) or the store fails, it returns the error with
// the locks it took held, released by unlock, and takes no more: the
// caller stores as it would have without them. A nil ChatLocks locks
// nothing.
func (l *ChatLocks) lock(ctx context.Context, exs ...memory.Exchange) (*chatHold, error) {
	h := &chatHold{}
	if l == nil {
		return h, nil
	}
	for _, ex := range exs {
		if id, ok := memory.ChatOf(ex); ok {
			h.chats = append(h.chats, id)
		}
	}
	slices.SortFunc(h.chats, func(a, b memory.Identity) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.User, b.User), cmp.Compare(a.Conversation, b.Conversation))
	})
	h.chats = slices.Compact(h.chats)
	for _, id := range h.chats {
		unlock, err := l.locks.Lock(ctx, id)
		if err != nil {
			return h, fmt.Errorf("lock chats in this process: %w", err)
		}
		h.local = append(h.local, unlock)
	}
	if l.store == nil || len(h.chats) == 0 {
		return h, nil
	}
	h.store = l.store
	if _, err := h.retake(ctx); err != nil {
		return h, err
	}
	return h, nil
}

// chatHold is the chat locks one store holds (ChatLocks.lock): the
// process's, then the store's.
type chatHold struct {
	chats   []memory.Identity
	local   []func()   // the process's locks of chats
	store   ChatLocker // nil: the process's locks alone
	release func()     // releases the store's; nil when not held
	// fence names the store's hold while held (else zero): every write
	// under it carries it (memory.Exchange.Fence), set just before.
	fence memory.Fence
	// takes counts the takes of the store's locks (retake): more than
	// one, they were taken again after a loss.
	takes int
}

// retake gives up the store's locks of h's chats, if held, and takes them
// again, keeping the process's. A store refused a write under them
// (memory.ErrLockLost): they ran out unrenewed while their holder stalled
// and another process may have taken them; retake waits until it is done
// with them. It reports whether it took them; without them (ctx ended,
// the store failed, or h holds no store's locks) the caller stores as it
// would have without them.
func (h *chatHold) retake(ctx context.Context) (bool, error) {
	h.drop()
	if h.store == nil || len(h.local) < len(h.chats) {
		return false, nil
	}
	fence, release, err := h.store.LockChats(ctx, h.chats)
	if err != nil {
		return false, fmt.Errorf("lock chats in the store: %w", err)
	}
	h.fence, h.release = fence, release
	h.takes++
	return true, nil
}

// lostAgain is called when the store refused a write under h's store
// locks (memory.ErrLockLost). It reports whether they had been taken
// again already (retake): a store refusing a write under a lock it just
// granted cannot see it (a pooler between it and its lock's connection),
// and would refuse every one. The store's locks are then released, and
// the caller stores without them, as when they cannot be taken, rather
// than take them and be refused again and again.
func (h *chatHold) lostAgain() bool {
	if h.takes < 2 {
		return false
	}
	h.drop()
	return true
}

// drop releases the store's locks h holds, if any: the writes that name
// their fence are refused from then on.
func (h *chatHold) drop() {
	if h.release != nil {
		h.release()
		h.release, h.fence = nil, 0
	}
}

// fenced returns ex to be written under h: with the fence of the store's
// locks h holds now (zero without them).
func (h *chatHold) fenced(ex memory.Exchange) memory.Exchange {
	ex.Fence = h.fence
	return ex
}

// unlock releases every lock h holds.
func (h *chatHold) unlock() {
	h.drop()
	for _, unlock := range h.local {
		unlock()
	}
	h.local = nil
}
