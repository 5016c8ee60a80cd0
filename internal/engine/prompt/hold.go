package prompt

import (
	"github.com/memgate/memgate/internal/memory"
)

// heldSummaries remembers, per conversation, the summary the last stored
// turn's prompt showed (Options.HoldSummary), so that the next request can
// show it again while the turns after it still fit: a new summary version
// changes the stable block, and with it every byte of the prompt after the
// client's system messages. It lives in one gateway process and is
// bounded (least recently put conversations go first): after a restart,
// on another gateway, or for a conversation it no longer holds, the newest
// summary is shown. A summary is held under the user's Messages revision
// (memory.Revisions), which only an update or delete of their messages
// moves (an erasure, a conversation deleted or moved, a reply
// superseded), never a new turn: after one, nothing held before it is
// shown again. Safe for concurrent use.
type heldSummaries struct {
	convTable[held]
}

// held is a summary and the Messages revision it was held under.
type held struct {
	summary  memory.Summary
	messages int64
}

func newHeldSummaries(convs int) *heldSummaries {
	return &heldSummaries{newConvTable[held](convs)}
}

// usable returns the summary held for id when it was held under rev's
// Messages revision, is older than latest (a summary of the same
// conversation) and stored, the newest stored messages loaded, reach back
// to the first turn after it: the prompt can then show it with every turn
// it does not cover. Otherwise (rev unknown included) it returns nil.
func (h *heldSummaries) usable(id memory.Identity, rev *memory.Revisions, latest *memory.Summary, stored []memory.Message) *memory.Summary {
	if h == nil || rev == nil || latest == nil || len(stored) == 0 {
		return nil
	}
	// Peek: a read does not make a conversation recently put.
	e, ok := h.convs.Peek(id)
	if !ok || e.messages != rev.Messages || e.summary.Version >= latest.Version || e.summary.ToSeq+1 < stored[0].Seq {
		return nil
	}
	return &e.summary
}

// put holds s, under rev's Messages revision, as what id's last stored
// turn was shown; nil (the turn was shown no summary, or rev is unknown)
// holds nothing for id, nor does a request whose parts loaded before a
// forget of its user (epoch).
func (h *heldSummaries) put(id memory.Identity, rev *memory.Revisions, epoch uint64, s *memory.Summary) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.forgotSince(id, epoch) {
		return
	}
	if s == nil || rev == nil {
		h.convs.Remove(id)
		return
	}
	h.convs.Add(id, held{summary: *s, messages: rev.Messages})
}
