package record

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

// errUnlocked marks a chat turn not stored because its chat's locks
// could not be taken (ChatLocks): it waits in the capture queue, or is
// tried again later, never stored without them.
var errUnlocked = errors.New("chat locks not taken")

// lockAndCheck readies ex's save under hold: it takes hold's locks when
// hold does not hold them (waiting at most lockWait), then, unless ex was
// checked under this very take (*checked, the take it was checked under),
// adopts its chat's first turns and checks whether it was stored ahead
// (ahead: ex is a duplicate), within opWait (0: ctx alone bounds them, as
// it does the save). An exchange of no chat needs neither. An error means
// ex cannot be saved now: its locks not taken (errUnlocked), or its
// adoption or check failed (memory.ErrLockLost among them) — the caller
// tries again later, as after a failed save, and never saves ex without
// them.
func lockAndCheck(ctx context.Context, hold *chatHold, lockWait, opWait time.Duration, a Adopter, ex memory.Exchange, checked *int, logger *slog.Logger) (ahead bool, err error) {
	if _, ok := memory.ChatOf(ex); !ok {
		return false, nil
	}
	lctx, cancel := context.WithTimeout(ctx, lockWait)
	err = hold.take(lctx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("%w: %w", errUnlocked, err)
	}
	if *checked == hold.takes {
		return false, nil
	}
	if opWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opWait)
		defer cancel()
	}
	if err := adoptFirstTurns(ctx, a, hold.fenced(ex), logger); err != nil {
		return false, err
	}
	if ahead, err = storedAhead(ctx, a, ex); err != nil {
		return false, err
	}
	*checked = hold.takes
	return ahead, nil
}

// adoptFirstTurns moves, before an exchange of a derived conversation (or
// of a branch of one, from its Root) that resent history is stored, the
// exchanges of that history stored in the user's default conversation into
// it (see Adopter), so the save aligns the history with them and stores
// nothing twice, under the chat's lock hold ex names
// (memory.Exchange.Fence). It returns the Adopter's error: the save must
// not go on then (the first turns would stay in default, and be stored
// again as the continuation's history), and is tried again later.
func adoptFirstTurns(ctx context.Context, a Adopter, ex memory.Exchange, logger *slog.Logger) error {
	prior := ex.Prior
	if ex.Partial != nil {
		// A reply that went on with the one the history ended with: the
		// history is the client's, that partial reply its last message.
		prior = append(slices.Clip(prior), *ex.Partial)
	}
	if a == nil || !ex.Derived || len(prior) == 0 {
		return nil
	}
	n, err := a.Adopt(ctx, ex.Identity, ex.Root, prior, ex.Received, ex.Fence)
	if err != nil {
		return fmt.Errorf("adopt the chat's first turns into %s: %w", ex.Conversation, err)
	}
	if n > 0 {
		logger.Debug("capture moved a chat's first turns into its conversation", "exchange", ex.ID, "conversation", ex.Conversation, "messages", n)
	}
	return nil
}

// storedAhead reports whether ex, a full-history chat's first turn, is
// stored already, as the history its continuation resent (the
// continuation was stored first, in the chat's conversation or a branch
// of it: its capture overtook ex's, say when ex waited in the capture
// queue). ex is then a duplicate and not stored in the default
// conversation. A failed check returns its error: ex is not stored
// then (it may be a duplicate), and is tried again later.
func storedAhead(ctx context.Context, a Adopter, ex memory.Exchange) (bool, error) {
	if a == nil || ex.Candidate == "" {
		return false, nil
	}
	ok, err := a.Continued(ctx, ex)
	if err != nil {
		return false, fmt.Errorf("check the first turn's candidate conversation: %w", err)
	}
	return ok, nil
}
