package contract

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// AdoptTx is what Adopt needs of a store's transaction: the SQL of a move
// of a chat's first turns out of the user's default conversation.
type AdoptTx interface {
	// Lock readies the move from from (the default conversation) into
	// to, taking what locks the store needs; ok is false when there is
	// nothing to adopt: to holds messages of its own, or from is gone.
	Lock(ctx context.Context, from, to memory.Identity) (ok bool, err error)
	// Deleted returns when conversation to was last deleted (zero:
	// never), read after Lock, so no deletion of to commits in between.
	Deleted(ctx context.Context, to memory.Identity) (time.Time, error)
	// Candidates returns the seqs of the live first messages of from's
	// exchanges recorded with candidate conversation candidate
	// (RecordCandidate) that no summary of from covers, newest first.
	Candidates(ctx context.Context, from memory.Identity, candidate string) ([]int64, error)
	// Live returns up to n live messages of from from seq on, in seq order.
	Live(ctx context.Context, from memory.Identity, seq int64, n int) ([]memory.Message, error)
	// Move moves run, live messages of from, into to, renumbered 1..n
	// with their keys, exchange records and recall items, drops their
	// candidate records and from when nothing is left in it, and moves
	// the fact sources.
	Move(ctx context.Context, from, to memory.Identity, run []memory.Message) error
}

// Adopt moves into conversation to, when it holds no message yet, the
// exchanges of the user's default conversation recorded with candidate
// candidate (to.Conversation itself when "", else the derived conversation
// to branched from: memory.Exchange.Root) that the resent history prior
// starts with
// (memory.Adoptable; the newest recorded exchange whose run matches wins),
// and returns how many messages moved (0 when nothing matched). Exchanges
// a summary of the default conversation covers stay. Nothing moves into a
// conversation deleted at or after received, when the continuation was
// received (memory.Exchange.Received; zero: no deletion stops it, as none
// drops its save, DeletedSince): a continuation in flight during the
// deletion, whose save is dropped, must not bring the conversation back
// with the chat's first turns.
//
// It tries nothing for an invalid identity (memory.ErrInvalid), the
// default conversation or no history, nor when busy, read outside any
// transaction, says to holds messages (every later turn of a chat asks
// again). Else inTx runs the move in one write transaction, through the
// AdoptTx it hands, and rolls it back when it fails or moves nothing (a
// store's Lock may have written).
func Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time,
	busy func(context.Context) (bool, error), inTx func(func(AdoptTx) error) error) (int, error) {
	if err := ValidIdentity(to); err != nil || len(prior) == 0 || to.Conversation == memory.DefaultConversation {
		return 0, err
	}
	if b, err := busy(ctx); b || err != nil {
		return 0, err
	}
	moved := 0
	err := inTx(func(tx AdoptTx) error {
		var err error
		if moved, err = adopt(ctx, tx, to, candidate, prior, received); err == nil && moved == 0 {
			return errNothingToAdopt
		}
		return err
	})
	if errors.Is(err, errNothingToAdopt) {
		return 0, nil
	}
	return moved, err
}

// errNothingToAdopt rolls back an Adopt that moved nothing.
var errNothingToAdopt = errors.New("nothing to adopt")

// adopt is Adopt's transaction, through tx.
func adopt(ctx context.Context, tx AdoptTx, to memory.Identity, candidate string, prior []memory.Message, received time.Time) (int, error) {
	from := to
	from.Conversation = memory.DefaultConversation
	if ok, err := tx.Lock(ctx, from, to); !ok || err != nil {
		return 0, err
	}
	deleted, err := tx.Deleted(ctx, to)
	if err != nil {
		return 0, fmt.Errorf("check deletion: %w", err)
	}
	if DeletedSince(memory.Exchange{Received: received}, deleted) {
		return 0, nil
	}
	if candidate == "" {
		candidate = to.Conversation
	}
	starts, err := tx.Candidates(ctx, from, candidate)
	if err != nil {
		return 0, err
	}
	for _, start := range starts {
		stored, err := tx.Live(ctx, from, start, len(prior)+1)
		if err != nil {
			return 0, fmt.Errorf("load candidate: %w", err)
		}
		if n := memory.Adoptable(stored, prior); n > 0 {
			return n, tx.Move(ctx, from, to, stored[:n])
		}
	}
	return 0, nil
}

// Continued reports whether the conversation ex.Candidate, or one of the
// conversations recorded with it as their chat's derived conversation
// (branches: the branches a continuation started, RecordCandidate), starts
// with ex's turn and reply (by fingerprint), read by first (its first n
// live messages): ex, a full-history chat's first turn, was stored there
// already, as the history its continuation resent, when the continuation
// was stored first.
func Continued(ctx context.Context, ex memory.Exchange,
	first func(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error),
	branches func(ctx context.Context, user memory.Identity, candidate string) ([]string, error)) (bool, error) {
	if ex.Candidate == "" {
		return false, nil
	}
	id := ex.Identity
	want := append(append([]memory.Message(nil), ex.Turn...), ex.Reply)
	convs, err := branches(ctx, id, ex.Candidate)
	if err != nil {
		return false, fmt.Errorf("find branches: %w", err)
	}
	for _, conv := range append([]string{ex.Candidate}, convs...) {
		id.Conversation = conv
		stored, err := first(ctx, id, len(want))
		if err != nil {
			return false, err
		}
		if memory.StartsWith(stored, want) {
			return true, nil
		}
	}
	return false, nil
}
