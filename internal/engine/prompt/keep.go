package prompt

import (
	"crypto/sha256"
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// keptBlocks remembers, per conversation, the recalled block each user turn
// was sent with (Options.KeepRecall, Options.KeepRecallResent), so that the
// next request renders that turn with its block in place and the previous
// request's prompt repeats as its prefix. It lives in one gateway process
// and is bounded (least recently used conversations go first): after a
// restart, on another gateway, or for a turn it no longer holds, the turn
// is rendered without its block. A conversation's blocks are held under
// the user's Messages and Changed revisions (memory.Revisions), which an
// erasure, a deleted or moved conversation, a superseded reply and a
// deleted or changed item move, never a new turn: after one, no block held
// before it is shown again. Without revisions nothing is held. Safe for
// concurrent use.
type keptBlocks struct {
	// convTable's mu guards the keptConv values too, which put changes
	// in place.
	convTable[*keptConv]
	per int // blocks held per conversation
}

// keptConv is one conversation's blocks, by turn, oldest first, and the
// revisions they were held under.
type keptConv struct {
	rev    keptRev
	turns  []turnKey
	blocks map[turnKey]string
}

// keptRev is what a kept block's freshness is judged by: the user's
// Messages and Changed revisions.
type keptRev struct{ messages, changed int64 }

func keptRevOf(rev *memory.Revisions) keptRev {
	return keptRev{messages: rev.Messages, changed: rev.Changed}
}

// turnKey identifies a user turn by its role and text: the current turn's
// message, the stored message the write path makes of it and the same turn
// resent by a full-history client agree on both.
type turnKey [sha256.Size]byte

func keyOf(m memory.Message) turnKey {
	return sha256.Sum256([]byte(m.Role + "\x00" + strings.TrimSpace(m.Content)))
}

func newKeptBlocks(convs, perConv int) *keptBlocks {
	return &keptBlocks{convTable: newConvTable[*keptConv](convs), per: max(perConv, 1)}
}

// lookup returns the blocks kept for id's turns under rev (nil when none,
// or when rev is unknown or not the one they were kept under), and, for a
// turn id holds none for, those kept for the same user's conversation root
// ("": none; memory.Request.Root, of which id's is a branch: the chat's
// first turn kept its block there). The map returned is a copy.
func (k *keptBlocks) lookup(id memory.Identity, root string, rev *memory.Revisions) map[turnKey]string {
	if k == nil || rev == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out map[turnKey]string
	ids := []memory.Identity{id}
	if root != "" && root != id.Conversation {
		r := id
		r.Conversation = root
		ids = []memory.Identity{r, id} // id's own win
	}
	for _, id := range ids {
		c, ok := k.convs.Get(id)
		if !ok || c.rev != keptRevOf(rev) || len(c.blocks) == 0 {
			continue
		}
		if out == nil {
			out = make(map[turnKey]string, len(c.blocks))
		}
		for t, b := range c.blocks {
			out[t] = b
		}
	}
	return out
}

// put keeps block, under rev, as what the turn m of id was sent with; an
// empty block (the turn was sent without one) forgets what an earlier turn
// of the same text was kept with. Blocks kept under other revisions are
// dropped first; with rev unknown nothing is kept. Only turns with a block
// take one of the conversation's places, so a long chat of statements does
// not push its asking turns' blocks out. A request whose parts loaded
// before a forget of its user (epoch) keeps nothing.
func (k *keptBlocks) put(id memory.Identity, rev *memory.Revisions, epoch uint64, m memory.Message, block string) {
	if k == nil || rev == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.forgotSince(id, epoch) {
		return
	}
	r := keptRevOf(rev)
	c, ok := k.convs.Get(id)
	if !ok || c.rev != r {
		if block == "" {
			if ok {
				k.convs.Remove(id)
			}
			return
		}
		c = &keptConv{rev: r, blocks: map[turnKey]string{}}
		k.convs.Add(id, c)
	}
	t := keyOf(m)
	if block == "" {
		if _, ok := c.blocks[t]; ok {
			delete(c.blocks, t)
			c.turns = slices.DeleteFunc(c.turns, func(x turnKey) bool { return x == t })
		}
		return
	}
	if _, ok := c.blocks[t]; !ok {
		c.turns = append(c.turns, t)
		if len(c.turns) > k.per {
			delete(c.blocks, c.turns[0])
			c.turns = c.turns[1:]
		}
	}
	c.blocks[t] = block
}

// keepsRecall reports whether past turns of req are rendered with their
// kept blocks: for a client that resends its history (fullHistory) with
// Options.KeepRecallResent, for one that sends only its newest turn with
// KeepRecall, and only when req's API renders blocks in place
// (memory.Request.BlocksInPlace): where the recalled blocks all go before
// the current turn, kept ones would add tokens no cache serves.
func (a *Assembler) keepsRecall(req memory.Request, fullHistory bool) bool {
	if a.kept == nil || !req.BlocksInPlace {
		return false
	}
	if fullHistory {
		return a.opts.KeepRecallResent
	}
	return a.opts.KeepRecall
}

// keepsFirst reports whether a request that resends no history keeps its
// question's block for its conversation's next request, which may resend
// the question (a full-history chat's first request looks just like a
// client that sends only its newest turn): with KeepRecallResent, when
// req's API puts a resent turn's block back in place
// (memory.Request.ResentInPlace).
func (a *Assembler) keepsFirst(req memory.Request, fullHistory bool) bool {
	return !fullHistory && a.kept != nil && a.opts.KeepRecallResent && req.ResentInPlace
}

// keepBlock keeps block (rev: see keptBlocks) as what the current turn's
// user message was sent with, for the next request of req's conversation
// when keepsRecall. A request that resends no history may be a
// full-history chat's first (keepsFirst), whose next request resends its
// question; its block is kept for that request's conversation too:
//
//   - in the user's default conversation, where such a request lands
//     when it names none, for the conversation the chat's next request
//     derives (memory.Candidate; a branch of it finds it there too:
//     keptBlocks.lookup);
//   - in any other conversation (named: X-Memory-Conversation), for that
//     conversation, when the question opens it (ld holds no summary and
//     no other user turn), so that a client that only ever sends its
//     newest turn keeps no block per turn, which it never resends.
func (a *Assembler) keepBlock(req memory.Request, ld loaded, fullHistory bool, current []memory.Message, block string) {
	i := slices.IndexFunc(current, func(m memory.Message) bool { return m.Role == "user" })
	if i < 0 {
		return
	}
	q := current[i]
	keeps := a.keepsRecall(req, fullHistory)
	if keeps {
		a.kept.put(req.Identity, ld.rev, ld.keptEpoch, q, block)
	}
	if !a.keepsFirst(req, fullHistory) {
		return
	}
	if req.Conversation == memory.DefaultConversation {
		if c := memory.Candidate(req.Tenant, req.User, req.Messages); c != "" {
			id := req.Identity
			id.Conversation = c
			a.kept.put(id, ld.rev, ld.keptEpoch, q, block)
		}
		return
	}
	if keeps {
		return // kept for req's conversation already
	}
	opens := ld.summary == nil && !slices.ContainsFunc(ld.stored, func(m memory.Message) bool {
		return m.Role == "user" && keyOf(m) != keyOf(q)
	})
	if opens {
		a.kept.put(req.Identity, ld.rev, ld.keptEpoch, q, block)
	}
}

// showAlso makes pc treat the passages text shows as shown
// (partCosts.shown) from now on, those it has seen already included: a
// pack then charges them and shows only the others.
func (pc *partCosts) showAlso(text string) {
	if text == "" {
		return
	}
	prev := pc.shown
	pc.shown = func(it memory.Item) bool { return (prev != nil && prev(it)) || pc.a.q.shows(text, it) }
	for i, s := range pc.state {
		if s == itemShowable && pc.a.q.shows(text, pc.items[i]) {
			pc.state[i] = itemShown
		}
	}
}

// passagesBlock renders the passages of sel alone (not its facts or
// summary) as a recalled block, shrunk to cost at most room, and returns
// it and its passages' line costs; an empty block when sel has none.
func (a *Assembler) passagesBlock(model string, sel selection, room int) (blocks, int, error) {
	if len(sel.data.Passages) == 0 {
		return blocks{}, 0, nil
	}
	only := selection{data: BlockData{Passages: sel.data.Passages}, passageCosts: sel.passageCosts}
	b, sections, err := a.block(model, only, room)
	return b, sections[partRecall], err
}
