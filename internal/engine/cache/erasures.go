package cache

import (
	"context"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// erasedOwners is how many owners' latest forgets an Erasures records one
// by one: far more than a read lasts erasures for, so that an owner's
// value is refused for another owner's forget only when this many
// owners were forgotten while it was read.
const erasedOwners = 1024

// ticks counts the forgets and clears of every Erasures of the process,
// in one sequence, so that an epoch taken once (Epoch, before a batch of
// exchanges is read from a queue: WithEpoch) is compared with any
// cache's records.
var ticks atomic.Uint64

// Epoch returns the count of forgets and clears so far, of every cache:
// take it before reading what values are computed from, for PutSince (or
// for WithEpoch, when the values are computed further on).
func Epoch() uint64 { return ticks.Load() }

// epochKey is the context key of WithEpoch.
type epochKey struct{}

// WithEpoch returns ctx carrying epoch, an Epoch taken before what the
// calls under ctx compute values from was read (an enrichment round's
// exchanges, read from the queue before its hooks start): EpochOf returns
// it, so that a value of a user erased in between is not cached.
func WithEpoch(ctx context.Context, epoch uint64) context.Context {
	return context.WithValue(ctx, epochKey{}, epoch)
}

// EpochOf returns the epoch ctx carries (WithEpoch), or else Epoch.
func EpochOf(ctx context.Context) uint64 {
	if e, ok := ctx.Value(epochKey{}).(uint64); ok {
		return e
	}
	return Epoch()
}

// Erasures records the forgets (an erasure, a conversation deletion) and
// clears of what holds users' values, so that a value read before its
// owner's forget is not kept after it, while the other owners' values
// read meanwhile are (Since). It counts them (Epoch, taken before a value
// is read: one count for every Erasures, ticks), records the count at
// each of the last erasedOwners owners' forgets, the highest count it
// stopped recording (floor: an owner
// forgotten at or before it may have been forgotten at any count up to
// it) and the count at the last clear. Forget, Clear and Since are
// called under one lock of the caller's, the one that orders them with
// its puts; Epoch at any time, without it (an atomic read, for the
// request path). The zero Erasures has recorded none; it must not be
// copied.
type Erasures struct {
	forgot  *simplelru.LRU[Owner, uint64] // nil until the first Forget
	floor   uint64
	cleared uint64
}

// Epoch returns the count of forgets and clears so far: take it before
// reading what a value is computed from, for Since.
func (e *Erasures) Epoch() uint64 { return Epoch() }

// Forget counts a forget of owner; the caller's lock is held.
func (e *Erasures) Forget(owner Owner) {
	if e.forgot == nil {
		// Called under the caller's lock, by forgot.Add.
		e.forgot, _ = simplelru.NewLRU(erasedOwners, func(_ Owner, at uint64) { e.floor = max(e.floor, at) }) // errors only on a size <= 0
	}
	e.forgot.Add(owner, ticks.Add(1))
}

// Clear counts a forget of every owner; the caller's lock is held.
func (e *Erasures) Clear() {
	e.cleared = ticks.Add(1)
}

// Since reports whether owner may have been forgotten after the count
// epoch (Epoch): forgotten since, or every owner cleared since, or their
// forget no longer recorded. An owner's value read at epoch is then not
// kept: it may hold what the forget erased. The zero Owner (no user's
// value) is forgotten only by a clear. The caller's lock is held.
func (e *Erasures) Since(owner Owner, epoch uint64) bool {
	if e.cleared > epoch || e.floor > epoch {
		return true
	}
	return e.Forgot(owner, epoch)
}

// Forgot reports whether owner itself was forgotten after the count epoch
// (its forget still recorded), not only every owner by a clear or the
// floor. The caller's lock is held.
func (e *Erasures) Forgot(owner Owner, epoch uint64) bool {
	if e.forgot == nil {
		return false
	}
	at, ok := e.forgot.Peek(owner)
	return ok && at > epoch
}
