package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
)

// RevisionReader reads a user's memory.Revisions in one lookup.
type RevisionReader interface {
	ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error)
}

// Store is what Reads reads through, a store's SQL reads of a
// conversation's latest summary and a user's facts, and the erasure of a
// user.
type Store interface {
	DeleteUser(ctx context.Context, tenant, user string) error
	// LatestSummary returns the newest summary version, or
	// memory.ErrNotFound.
	LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
	// Facts returns the user's current facts at now (with history,
	// superseded and expired ones too), most recently updated first.
	Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
}

// DefaultKnowledgeBytes bounds each of the facts and the summaries (4 MiB,
// some thousands of users' or conversations').
const DefaultKnowledgeBytes = 4 << 20

// convKey names what Reads holds of a conversation, or of a user (Of "").
type convKey = Key[string]

// Reads keeps in memory a user's facts (under the user's Revisions.Facts)
// and a conversation's latest summary (Revisions.Summaries), and drops
// them when the user is erased. Each read takes the Revisions its request
// read once, before any of its reads; nil reads through (a lookup that
// failed). It is safe for concurrent use.
type Reads struct {
	src       Store
	emb       Clearer // emptied by an erasure; nil: none
	facts     *Cache[convKey, []memory.Fact]
	summaries *Cache[convKey, *memory.Summary] // nil: none
}

// Clearer is a cache an erasure empties whole (recall's embeddings).
type Clearer interface{ Clear() }

// NewReads returns a Reads over src whose erasures empty emb too (nil:
// none), its facts and summaries bounded at knowledgeBytes each.
func NewReads(src Store, emb Clearer, knowledgeBytes int) *Reads {
	return &Reads{src: src, emb: emb,
		facts:     New("facts", knowledgeBytes, factsSize),
		summaries: New("summaries", knowledgeBytes, summarySize)}
}

// LatestSummary returns the conversation's newest summary, or
// memory.ErrNotFound, as src's LatestSummary does, kept (or that there is
// none) under rev's Summaries. The summary is the caller's.
func (r *Reads) LatestSummary(ctx context.Context, rev *memory.Revisions, id memory.Identity) (memory.Summary, error) {
	if rev == nil {
		return r.src.LatestSummary(ctx, id)
	}
	key := convKey{id.Tenant, id.User, rev.Summaries, id.Conversation}
	h, ok := r.summaries.Get(key)
	if !ok {
		sum, err := r.src.LatestSummary(ctx, id)
		if err != nil && !errors.Is(err, memory.ErrNotFound) {
			return memory.Summary{}, err
		} else if err == nil {
			h = &sum
		}
		r.summaries.Put(key, h)
	}
	if h == nil {
		return memory.Summary{}, fmt.Errorf("summary of %s: %w", id.Conversation, memory.ErrNotFound)
	}
	sum := *h
	sum.KeyEvents = slices.Clone(sum.KeyEvents)
	sum.Preserved.Numbers = slices.Clone(sum.Preserved.Numbers)
	sum.Preserved.Dates = slices.Clone(sum.Preserved.Dates)
	sum.Preserved.Decisions = slices.Clone(sum.Preserved.Decisions)
	return sum, nil
}

// Facts returns the user's facts as src's Facts does; the current ones
// (not history) from their facts not superseded, kept under rev's Facts,
// expired at now on every call. The slice and its facts are the caller's.
func (r *Reads) Facts(ctx context.Context, rev *memory.Revisions, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	if rev == nil || history {
		return r.src.Facts(ctx, tenant, user, now, history)
	}
	key := convKey{tenant, user, rev.Facts, ""}
	live, ok := r.facts.Get(key)
	if !ok {
		all, err := r.src.Facts(ctx, tenant, user, now, true)
		if err != nil {
			return nil, err
		}
		live = slices.DeleteFunc(all, func(f memory.Fact) bool { return f.SupersededAt != nil })
		r.facts.Put(key, live)
	}
	out := make([]memory.Fact, 0, len(live))
	for _, f := range live {
		if f.ExpiresAt != nil {
			if !f.ExpiresAt.After(now) {
				continue
			}
			t := *f.ExpiresAt
			f.ExpiresAt = &t
		}
		out = append(out, f)
	}
	return out, nil
}

// Collectors returns the Prometheus collectors of r's caches.
func (r *Reads) Collectors() []prometheus.Collector {
	return slices.Concat(r.facts.Collectors(), r.summaries.Collectors())
}

// DeleteUser erases the user with the store and, failed or not, drops
// what r holds of them (see Cache.Drop) and empties the embeddings.
func (r *Reads) DeleteUser(ctx context.Context, tenant, user string) error {
	err := r.src.DeleteUser(ctx, tenant, user)
	of := func(k convKey) bool { return k.Tenant == tenant && k.User == user }
	r.facts.Drop(of)
	r.summaries.Drop(of)
	if r.emb != nil {
		r.emb.Clear()
	}
	return err
}

// factsSize is roughly what a user's held facts take in memory, in bytes.
func factsSize(_ convKey, fs []memory.Fact) int {
	n := 64
	for _, f := range fs {
		n += 200 + len(f.Key) + len(f.Value) + len(f.Conversation)
	}
	return n
}

// summarySize is roughly what a held summary takes in memory, in bytes.
func summarySize(k convKey, h *memory.Summary) int {
	n := 200 + len(k.Of)
	if h != nil {
		n += len(h.Text)
		for _, s := range slices.Concat(h.KeyEvents, h.Preserved.Numbers, h.Preserved.Dates, h.Preserved.Decisions) {
			n += 16 + len(s)
		}
	}
	return n
}
