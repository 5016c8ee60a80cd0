package record

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/memgate/memgate/internal/memory"
)

// chatStripes is how many locks ChatLocks spreads chats over.
const chatStripes = 64

// ChatLocks serializes, within a process, the storing of a full-history
// chat's first turn (memory.Exchange.Candidate) and of the turns that
// continue it (Derived, with history: their Root, else their
// Conversation), wherever each is stored — a Capturer's lanes, a Worker.
// Each of the two checks what the other stored before it stores
// (storedAhead, Adopter.Adopt) and records its candidate after; run
// together, both checks could miss the other, and the first turn would be
// stored in the default conversation and, as the resent history, in the
// continuation's branch too. A Capturer and a Worker of one process share
// one (Options.Chats, WorkerOptions.Chats). It is striped: two chats may
// wait for each other. Storing holds no other lock while it waits.
type ChatLocks struct {
	seed    maphash.Seed
	stripes [chatStripes]sync.Mutex
	waiting atomic.Int64 // stores waiting for a chat's lock, for tests
}

// NewChatLocks returns the chat locks of one process.
func NewChatLocks() *ChatLocks { return &ChatLocks{seed: maphash.MakeSeed()} }

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

// lock takes the locks of the chats of exs, in stripe order, and returns
// what releases them. A nil ChatLocks locks nothing.
func (l *ChatLocks) lock(exs ...memory.Exchange) (unlock func()) {
	if l == nil {
		return func() {}
	}
	var held []int
	for _, ex := range exs {
		if id, ok := chatOf(ex); ok {
			held = append(held, int(maphash.Comparable(l.seed, id)%chatStripes))
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
	return func() {
		for _, s := range held {
			l.stripes[s].Unlock()
		}
	}
}
