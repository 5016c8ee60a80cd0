package prompt

import (
	"crypto/sha256"
	"strings"
	"sync"

	"github.com/memgate/memgate/internal/memory"
)

// keptBlocks remembers, per conversation, the recalled block each user turn
// was sent with (Options.KeepRecall), so that the next request renders that
// turn with its block in place and the previous request's prompt repeats as
// its prefix. It lives in one gateway process and is bounded: after a
// restart, on another gateway, or for a turn it no longer holds, the turn is
// rendered without its block (today's layout). Safe for concurrent use.
type keptBlocks struct {
	mu    sync.Mutex
	convs map[memory.Identity]*keptConv
	order []memory.Identity // oldest first, for eviction
	max   int               // conversations held
	per   int               // turns held per conversation
}

// keptConv is one conversation's blocks, by turn, oldest first.
type keptConv struct {
	turns  []turnKey
	blocks map[turnKey]string
}

// turnKey identifies a user turn by its role and text: the current turn's
// message and the stored message the write path makes of it agree on both.
type turnKey [sha256.Size]byte

func keyOf(m memory.Message) turnKey {
	return sha256.Sum256([]byte(m.Role + "\x00" + strings.TrimSpace(m.Content)))
}

func newKeptBlocks(convs, perConv int) *keptBlocks {
	return &keptBlocks{convs: map[memory.Identity]*keptConv{}, max: max(convs, 1), per: max(perConv, 1)}
}

// lookup returns the blocks kept for id's turns (nil when none). The map
// returned is a copy.
func (k *keptBlocks) lookup(id memory.Identity) map[turnKey]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.convs[id]
	if c == nil {
		return nil
	}
	out := make(map[turnKey]string, len(c.blocks))
	for t, b := range c.blocks {
		out[t] = b
	}
	return out
}

// put keeps block as what the turn m of id was sent with (block may be
// empty: the turn was sent without one).
func (k *keptBlocks) put(id memory.Identity, m memory.Message, block string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.convs[id]
	if c == nil {
		if len(k.order) >= k.max {
			delete(k.convs, k.order[0])
			k.order = k.order[1:]
		}
		c = &keptConv{blocks: map[turnKey]string{}}
		k.convs[id] = c
		k.order = append(k.order, id)
	}
	t := keyOf(m)
	if _, ok := c.blocks[t]; !ok {
		c.turns = append(c.turns, t)
		if len(c.turns) > k.per {
			delete(c.blocks, c.turns[0])
			c.turns = c.turns[1:]
		}
	}
	c.blocks[t] = block
}
