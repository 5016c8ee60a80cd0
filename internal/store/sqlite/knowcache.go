package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// defaultKnowledgeBytes bounds each of a Store's caches of facts and of
// summaries, over all users: 4 MiB, some thousands of users' facts or
// conversations' summaries.
const defaultKnowledgeBytes = 4 << 20

// heldSummary is a conversation's latest summary as held in a Store's
// summaries, or none (found false). Its slices are never modified once
// held.
type heldSummary struct {
	sum   memory.Summary
	found bool
}

// revKey names what a Store's caches hold of one user (one conversation's,
// for summaries and tails; Conv "" for the user's facts) as of a revision
// count of the user's: Revisions.Facts for facts, Summaries for summaries,
// Revisions.Tail for tails. A write moves the count (migrations 0013-0015's
// triggers, by any connection of any process), so an entry read before it
// is never looked up again.
type revKey struct {
	Tenant, User string
	Rev          int64
	Conv         string
}

// ofUser reports whether k is of the user's, for an erasure's cache.Drop.
func ofUser(tenant, user string) func(revKey) bool {
	return func(k revKey) bool { return k.Tenant == tenant && k.User == user }
}

// factsSize is roughly what a user's held facts take in memory, in bytes.
func factsSize(_ revKey, fs []memory.Fact) int {
	n := 64
	for _, f := range fs {
		n += 200 + len(f.Key) + len(f.Value) + len(f.Conversation)
	}
	return n
}

// summarySize is roughly what a held summary takes in memory, in bytes.
func summarySize(k revKey, h heldSummary) int {
	n := 200 + len(k.Conv) + len(h.sum.Text)
	for _, ss := range [][]string{h.sum.KeyEvents, h.sum.Preserved.Numbers, h.sum.Preserved.Dates, h.sum.Preserved.Decisions} {
		for _, s := range ss {
			n += 16 + len(s)
		}
	}
	return n
}

// currentFacts returns the user's facts neither superseded nor expired at
// now, most recently updated first (Facts without history).
//
// The user's facts not superseded are kept in memory as of the user's
// facts count (Revisions.Facts, moved by migration 0015's triggers on
// every write of their facts, by any connection of any process), read
// once per request when ctx carries a memory.Memo, and read again from the
// file when it has moved. Expiry is applied at now on every call, as the
// SQL does. The returned slice and its facts are the caller's.
func (s *Store) currentFacts(ctx context.Context, tenant, user string, now time.Time) ([]memory.Fact, error) {
	// The count is read before the facts, so facts read after a change are
	// never kept as of a count from before it.
	rev, err := cache.ReadRevisions(ctx, indexSource{s}, tenant, user)
	if err != nil {
		// Without the count nothing held can be trusted, nor kept.
		return s.facts(ctx, tenant, user, now, false)
	}
	key := revKey{tenant, user, rev.Facts, ""}
	live, ok := s.factCache.Get(key)
	if !ok {
		if live, err = s.liveFacts(ctx, tenant, user); err != nil {
			return nil, err
		}
		s.factCache.Put(key, live)
	}
	return unexpired(live, now), nil
}

// unexpired returns a new slice of the facts of fs not expired at now
// (expires_at IS NULL OR expires_at > now, in the stored encoding), in
// order, each ExpiresAt a copy of its own.
func unexpired(fs []memory.Fact, now time.Time) []memory.Fact {
	at := nanos(now)
	out := make([]memory.Fact, 0, len(fs))
	for _, f := range fs {
		if f.ExpiresAt != nil {
			if nanos(*f.ExpiresAt) <= at {
				continue
			}
			t := *f.ExpiresAt
			f.ExpiresAt = &t
		}
		out = append(out, f)
	}
	return out
}

// liveFacts reads the user's facts not superseded, expired or not, most
// recently updated first.
func (s *Store) liveFacts(ctx context.Context, tenant, user string) ([]memory.Fact, error) {
	return s.queryFacts(ctx, ` AND superseded_at IS NULL`, tenant, user)
}

// LatestSummary returns the newest summary version of the conversation, or
// memory.ErrNotFound when it has none.
//
// The latest summary (or that there is none) of each conversation is kept
// in memory as of the user's summaries count (Revisions.Summaries, moved
// by migration 0015's triggers on every write of their summaries, by any
// connection of any process), read once per request when ctx carries a
// memory.Memo, and read again from the file when it has moved. The
// returned summary is the caller's.
func (s *Store) LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error) {
	defer telemetry.Span(&ctx, "sqlite.LatestSummary")()
	// The count is read before the summary, so a summary read after a
	// change is never kept as of a count from before it.
	rev, err := cache.ReadRevisions(ctx, indexSource{s}, id.Tenant, id.User)
	if err != nil {
		// Without the count nothing held can be trusted, nor kept.
		return s.latestSummary(ctx, id)
	}
	key := revKey{id.Tenant, id.User, rev.Summaries, id.Conversation}
	if h, ok := s.summaryCache.Get(key); ok {
		return ownSummary(h, id)
	}
	sum, err := s.latestSummary(ctx, id)
	h := heldSummary{sum: sum, found: err == nil}
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return memory.Summary{}, err
	}
	s.summaryCache.Put(key, h)
	return ownSummary(h, id)
}

// ownSummary returns a copy of h's summary for a caller, sharing no slice
// with h, or memory.ErrNotFound when h holds none.
func ownSummary(h heldSummary, id memory.Identity) (memory.Summary, error) {
	if !h.found {
		return memory.Summary{}, fmt.Errorf("summary of %s: %w", id.Conversation, memory.ErrNotFound)
	}
	sum := h.sum
	sum.KeyEvents = slices.Clone(sum.KeyEvents)
	sum.Preserved.Numbers = slices.Clone(sum.Preserved.Numbers)
	sum.Preserved.Dates = slices.Clone(sum.Preserved.Dates)
	sum.Preserved.Decisions = slices.Clone(sum.Preserved.Decisions)
	return sum, nil
}
