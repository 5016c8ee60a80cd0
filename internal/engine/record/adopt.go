package record

import (
	"context"
	"log/slog"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Adopter keeps a full-history chat's first turn in the chat's conversation
// (implemented by the stores). A chat whose client resends its whole
// history and names no conversation sends its first turn alone, exactly
// like a client that sends only its newest turn, so that turn is stored in
// the user's default conversation; from the second turn on the chat has a
// conversation derived from its start (memory.DerivedConversation). The
// first turn is recorded with the conversation its continuation would
// derive, and that continuation moves it over before it is stored itself —
// also when the continuation was routed to a branch of that conversation
// (memory.BranchOf; the exchange's Root).
type Adopter interface {
	// The store's save of an exchange records, in its transaction, the
	// chat the exchange belongs to (memory.CandidateOf): stored in the
	// user's default conversation, it is that chat's first turn, which the
	// chat's continuation adopts; stored first in a branch of the chat's
	// conversation, it is a continuation that overtook the chat's first
	// turn, which Continued then finds there.
	//
	// Adopt moves into to, when it holds nothing yet, the exchanges of
	// the user's default conversation recorded with candidate (to's own
	// conversation when "") that prior (the history resent to to) starts
	// with, in one transaction, and returns how many messages moved. It
	// moves nothing into a conversation deleted at or after received (the
	// continuation's memory.Exchange.Received; zero: no deletion stops
	// it), as the continuation's own save is then dropped. Under a hold of
	// the chat's lock (fence not zero: ChatLocker) it moves only while that
	// hold holds it, else fails with memory.ErrLockLost.
	Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time, fence memory.Fence) (int, error)
	// Continued reports whether ex's candidate conversation, or a branch
	// of it recorded with it, starts with ex's turn and reply: the
	// continuation was stored first, with ex as its resent history.
	Continued(ctx context.Context, ex memory.Exchange) (bool, error)
}

// adoptFirstTurns moves, before an exchange of a derived conversation (or
// of a branch of one, from its Root) that resent history is stored, the
// exchanges of that history stored in the user's default conversation into
// it (see Adopter), so the save aligns
// the history with them and stores nothing twice, under the chat's lock
// hold ex names (memory.Exchange.Fence). A failure is logged and the save
// goes on: the first turns then stay in default, as without an Adopter.
func adoptFirstTurns(ctx context.Context, a Adopter, ex memory.Exchange, logger *slog.Logger) {
	if a == nil || !ex.Derived || len(ex.Prior) == 0 {
		return
	}
	n, err := a.Adopt(ctx, ex.Identity, ex.Root, ex.Prior, ex.Received, ex.Fence)
	switch {
	case err != nil:
		logger.Warn("capture could not move a chat's first turns into its conversation; they stay in the default conversation",
			"exchange", ex.ID, "conversation", ex.Conversation, "err", err)
	case n > 0:
		logger.Debug("capture moved a chat's first turns into its conversation", "exchange", ex.ID, "conversation", ex.Conversation, "messages", n)
	}
}

// storedAhead reports whether ex, a full-history chat's first turn, is
// stored already, as the history its continuation resent (the
// continuation was stored first, in the chat's conversation or a branch
// of it: its capture overtook ex's, say when ex waited in the capture
// queue). ex is then a duplicate and not stored in the default
// conversation. A failure is logged and reported as false.
func storedAhead(ctx context.Context, a Adopter, ex memory.Exchange, logger *slog.Logger) bool {
	if a == nil || ex.Candidate == "" {
		return false
	}
	ok, err := a.Continued(ctx, ex)
	if err != nil {
		logger.Warn("capture could not check a first turn's candidate conversation", "exchange", ex.ID, "err", err)
		return false
	}
	return ok
}
