package prompt

import (
	"container/list"
	"sync"

	"github.com/memgate/memgate/internal/memory"
)

// heldSummaries remembers, per conversation, the summary the last stored
// turn's prompt showed (Options.HoldSummary), so that the next request can
// show it again while the turns after it still fit: a new summary version
// changes the stable block, and with it every byte of the prompt after the
// client's system messages. It lives in one gateway process and is
// bounded (least recently put conversations go first): after a restart,
// on another gateway, or for a conversation it no longer holds, the newest
// summary is shown. Safe for concurrent use.
type heldSummaries struct {
	mu    sync.Mutex
	convs map[memory.Identity]*list.Element // of held
	lru   *list.List                        // most recently put first
	max   int
}

// held is one conversation's held summary.
type held struct {
	id      memory.Identity
	summary memory.Summary
}

func newHeldSummaries(convs int) *heldSummaries {
	return &heldSummaries{convs: map[memory.Identity]*list.Element{}, lru: list.New(), max: max(convs, 1)}
}

// usable returns the summary held for id when it is older than latest (a
// summary of the same conversation) and stored, the newest stored messages
// loaded, reach back to the first turn after it: the prompt can then show
// it with every turn it does not cover. Otherwise it returns nil.
func (h *heldSummaries) usable(id memory.Identity, latest *memory.Summary, stored []memory.Message) *memory.Summary {
	if h == nil || latest == nil || len(stored) == 0 {
		return nil
	}
	h.mu.Lock()
	e, ok := h.convs[id]
	var s memory.Summary
	if ok {
		s = e.Value.(held).summary
	}
	h.mu.Unlock()
	if !ok || s.Version >= latest.Version || s.ToSeq+1 < stored[0].Seq {
		return nil
	}
	return &s
}

// put holds s as what id's last stored turn was shown; nil (the turn was
// shown no summary) holds nothing for id.
func (h *heldSummaries) put(id memory.Identity, s *memory.Summary) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.convs[id]
	switch {
	case s == nil && ok:
		h.lru.Remove(e)
		delete(h.convs, id)
	case s == nil:
	case ok:
		e.Value = held{id: id, summary: *s}
		h.lru.MoveToFront(e)
	default:
		if h.lru.Len() >= h.max {
			last := h.lru.Back()
			h.lru.Remove(last)
			delete(h.convs, last.Value.(held).id)
		}
		h.convs[id] = h.lru.PushFront(held{id: id, summary: *s})
	}
}
