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
// conversation's newest turns, its latest summary and a user's facts, and
// the saves and erasures that change them.
type Store interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
	DeleteUser(ctx context.Context, tenant, user string) error
	// Recent returns up to n newest live messages, oldest first.
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
	// LatestSummary returns the newest summary version, or
	// memory.ErrNotFound.
	LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
	// Facts returns the user's current facts at now (with history,
	// superseded and expired ones too), most recently updated first.
	Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
}

// DefaultTailBytes bounds the conversations' newest turns (8 MiB, about
// 25,000 messages of 300 bytes); DefaultKnowledgeBytes each of the facts
// and the summaries (4 MiB, some thousands of users' or conversations').
const DefaultTailBytes, DefaultKnowledgeBytes = 8 << 20, 4 << 20

// convKey names what Reads holds of a conversation, or of a user (Of "").
type convKey = Key[string]

// tailKeep is how many newest messages a tail grows to as saves append to
// it (a Recent asking for more keeps what it read).
const tailKeep = 64

// Reads keeps in memory what a request reads of a store besides its
// searches — a conversation's newest turns (under the user's
// Revisions.Tail), a user's facts (Revisions.Facts) and a conversation's
// latest summary (Revisions.Summaries) — and brings the store's saves and
// erasures to them. Each read takes the Revisions its request read once,
// before any of its reads; nil reads through (a lookup that failed). It is
// safe for concurrent use.
type Reads struct {
	src       Store
	emb       Clearer // emptied by an erasure; nil: none
	tails     *Cache[convKey, tail]
	facts     *Cache[convKey, []memory.Fact]
	summaries *Cache[convKey, *memory.Summary] // nil: none
}

// NewReads returns a Reads over src whose erasures empty emb too (nil:
// none), its tails bounded at tailBytes and its facts and summaries at
// knowledgeBytes each.
func NewReads(src Store, emb Clearer, tailBytes, knowledgeBytes int) *Reads {
	return &Reads{src: src, emb: emb,
		tails:     New("recent", tailBytes, tailSize),
		facts:     New("facts", knowledgeBytes, factsSize),
		summaries: New("summaries", knowledgeBytes, summarySize)}
}

// tail is a conversation's newest live messages, oldest first (all: every
// live one), never modified once held: a save appends past its length.
type tail struct {
	msgs []memory.Message
	all  bool
}

// Recent returns up to n newest live messages of the conversation, oldest
// first, as src's Recent does, kept under rev's Tail. The returned slice
// is the caller's; its messages' Raw is shared and must not be written to.
func (r *Reads) Recent(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Message, error) {
	if rev == nil || n <= 0 {
		return r.src.Recent(ctx, id, n)
	}
	key := convKey{id.Tenant, id.User, rev.Tail(), id.Conversation}
	if t, ok := r.tails.Get(key); ok && (len(t.msgs) >= n || t.all) {
		return slices.Clone(t.msgs[max(0, len(t.msgs)-n):]), nil
	}
	msgs, err := r.src.Recent(ctx, id, n)
	if err != nil {
		return nil, err
	}
	r.tails.Put(key, tail{msgs: slices.Clone(msgs), all: len(msgs) < n})
	return msgs, nil
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

// Saved brings the tails held to the counts the saves left (results[i]
// exs[i]'s), so a conversation's next Recent is answered from memory: for
// a save that superseded nothing and knows the user's Revisions.Tail just
// before its inserts (TailKnown), the tail held there with the stored
// messages appended is kept under the count it left. A batch's saves of
// one conversation chain, each finding the tail its predecessor kept.
func (r *Reads) Saved(exs []memory.Exchange, results []memory.SaveResult) {
	for i, ex := range exs {
		res := results[i]
		if res.Inserted == 0 || !res.TailKnown || res.Superseded > 0 {
			continue
		}
		if t, held := r.tails.Get(convKey{ex.Tenant, ex.User, res.TailBefore, ex.Conversation}); held {
			r.tails.Put(convKey{ex.Tenant, ex.User, res.TailBefore + int64(res.Inserted), ex.Conversation}, appendStored(t, res.Stored))
		}
	}
}

// appendStored returns t with stored appended, the newest
// max(len(t.msgs), tailKeep) kept. Messages t holds already (read after
// the save committed) are not appended again.
func appendStored(t tail, stored []memory.Message) tail {
	msgs := t.msgs
	for _, m := range stored {
		if len(msgs) == 0 || m.Seq > msgs[len(msgs)-1].Seq {
			msgs = append(msgs, m)
		}
	}
	if limit := max(len(t.msgs), tailKeep); len(msgs) > limit {
		return tail{msgs: msgs[len(msgs)-limit:]}
	}
	return tail{msgs: msgs, all: t.all}
}

// Collectors returns the Prometheus collectors of r's caches.
func (r *Reads) Collectors() []prometheus.Collector {
	return slices.Concat(r.tails.Collectors(), r.facts.Collectors(), r.summaries.Collectors())
}

// tailSize is roughly what one held tail takes in memory, in bytes.
func tailSize(k convKey, t tail) int {
	n := 64 + len(k.Of)
	for _, m := range t.msgs {
		// The identity's strings are shared by the conversation's messages.
		n += 160 + len(m.Key) + len(m.Role) + len(m.Content) + len(m.Raw)
	}
	return n
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
