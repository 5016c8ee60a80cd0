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
	// when ctx ends first or the store fails. A lock whose holder died or
	// froze is released (its connection closed, or after a lease of a
	// minute or more, renewed while its holder lives). The store's writes
	// that name the fence (memory.Exchange.Fence, Adopter.Adopt's) commit,
	// in their own transaction, only while that very hold still holds the
	// lock — not another hold of the chat, in another process or this one
	// — else fail with memory.ErrLockLost: the Capturer and the Worker
	// then take it again (chatHold.take) and check again before they
	// store. Writes naming no fence are not checked.
	LockChats(ctx context.Context, chats []memory.Identity) (fence memory.Fence, unlock func(), err error)
	// TryLockChats takes the locks of chats as LockChats does when no
	// holder has one of them, and reports whether it took them; it never
	// waits for another holder (one round trip). Not taken (ok false, or
	// an error), it holds nothing.
	TryLockChats(ctx context.Context, chats []memory.Identity) (fence memory.Fence, unlock func(), ok bool, err error)
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
// under a hold names its fence (chatHold.fenced), so the store refuses the
// writes of a hold that ended or lost its lock, whoever holds the chat
// since: the process's own lock is not what fences them. No chat turn is
// stored without its locks: a turn whose locks cannot be taken waits in
// the capture queue, or is retried, until they can. Storing holds no
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

// hold returns the hold of the chats of exs (memory.ChatOf), holding
// nothing yet: take takes them. A nil ChatLocks gives a hold that locks
// nothing, as does an exchange of no chat.
func (l *ChatLocks) hold(exs ...memory.Exchange) *chatHold {
	h := &chatHold{locks: l}
	if l == nil {
		return h
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
	return h
}

// lock returns the hold of the chats of exs, taken (see chatHold.take):
// with an error, it holds nothing, and none of those chats' turns may be
// stored under it until a later take succeeds.
func (l *ChatLocks) lock(ctx context.Context, exs ...memory.Exchange) (*chatHold, error) {
	h := l.hold(exs...)
	return h, h.take(ctx)
}

// chatHold is the chat locks one store holds (ChatLocks.hold): the
// process's, then the store's, all or none.
type chatHold struct {
	locks   *ChatLocks // nil: none to take
	chats   []memory.Identity
	local   []func() // the process's locks of chats, while held
	release func()   // releases the store's; nil when not held
	// fence names the store's hold while held (else zero): every write
	// under it carries it (memory.Exchange.Fence), set just before.
	fence memory.Fence
	// held: every lock of chats is held, as far as h knows (a write the
	// store refused says otherwise: lost).
	held bool
	// takes counts the takes (take): a check made under the hold (an
	// adoption, storedAhead) holds for the take it was made under only.
	takes int
	// err is the last take's failure; nil once a take succeeds.
	err error
}

// take takes the locks of h's chats, when h does not hold them: the
// process's, one chat after another in a fixed order, then the store's.
// When one cannot be taken before ctx ends (a store of the same chat
// holds it that long, or its holder froze and its lease has not run out
// yet) or the store fails, it releases those it took and returns the
// error: h then holds nothing, and the caller stores none of its chats'
// turns (they go to the capture queue, or are retried later).
func (h *chatHold) take(ctx context.Context) error {
	if h.held {
		return nil
	}
	h.unlock()
	if h.locks != nil && len(h.chats) > 0 {
		for _, id := range h.chats {
			unlock, err := h.locks.locks.Lock(ctx, id)
			if err != nil {
				h.unlock()
				h.err = fmt.Errorf("lock chats in this process: %w", err)
				return h.err
			}
			h.local = append(h.local, unlock)
		}
		if h.locks.store != nil {
			fence, release, err := h.locks.store.LockChats(ctx, h.chats)
			if err != nil {
				h.unlock()
				h.err = fmt.Errorf("lock chats in the store: %w", err)
				return h.err
			}
			h.fence, h.release = fence, release
		}
	}
	h.held, h.err = true, nil
	h.takes++
	return nil
}

// tryTake takes the locks of h's chats, as take does, when no holder has
// one of them — neither a store of this process nor another process —
// and reports whether it holds them; it never waits for another holder.
// Not taken (false, or an error: the store failed), h holds nothing, and
// its err is left as it was: take is what the caller does next.
func (h *chatHold) tryTake(ctx context.Context) (bool, error) {
	if h.held {
		return true, nil
	}
	h.unlock()
	if h.locks != nil && len(h.chats) > 0 {
		for _, id := range h.chats {
			unlock, ok := h.locks.locks.TryLock(id)
			if !ok {
				h.unlock()
				return false, nil
			}
			h.local = append(h.local, unlock)
		}
		if h.locks.store != nil {
			fence, release, ok, err := h.locks.store.TryLockChats(ctx, h.chats)
			if err != nil || !ok {
				h.unlock()
				if err != nil {
					return false, fmt.Errorf("lock chats in the store: %w", err)
				}
				return false, nil
			}
			h.fence, h.release = fence, release
		}
	}
	h.held, h.err = true, nil
	h.takes++
	return true, nil
}

// fenced returns ex to be written under h: with the fence of the store's
// locks h holds now (zero without them).
func (h *chatHold) fenced(ex memory.Exchange) memory.Exchange {
	ex.Fence = h.fence
	return ex
}

// unlock releases every lock h holds: the writes that name its fence are
// refused from then on. It is also what a holder does when the store
// refused a write under them (memory.ErrLockLost: they ran out unrenewed
// while it stalled, or their connection broke, and another holder may
// have them): its next take waits until that holder is done.
func (h *chatHold) unlock() {
	if h.release != nil {
		h.release()
		h.release, h.fence = nil, 0
	}
	for i := len(h.local) - 1; i >= 0; i-- {
		h.local[i]()
	}
	h.local, h.held = nil, false
}
