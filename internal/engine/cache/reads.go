package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
)

// Store is what Reads reads and writes through: a conversation's up to n
// newest live messages, oldest first (Recent); its newest summary version,
// or memory.ErrNotFound (LatestSummary); a user's current facts at now
// (with history, superseded and expired ones too), most recently updated
// first (Facts); up to limit live messages after afterSeq, oldest first
// (MessagesAfter: Head reads a conversation's first ones); and the saves
// and erasures that change them.
type Store interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
	DeleteUser(ctx context.Context, tenant, user string) error
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
	LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
	Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
	MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error)
}

// Forgetter is a cache whose entries name their owner (recall's
// embeddings, its fact extraction answers): an erasure drops the user's
// with Forget; Clear drops everyone's (erasures may have been missed: an
// erasure notice subscription lost).
type Forgetter interface {
	Forget(tenant, user string)
	Clear()
}

// Forgetters is a Forgetter over several caches whose entries name their
// owner (recall's embeddings, its fact extraction answers).
type Forgetters []Forgetter

// Forget makes each of fs forget the user.
func (fs Forgetters) Forget(tenant, user string) {
	for _, f := range fs {
		f.Forget(tenant, user)
	}
}

// Clear clears each of fs.
func (fs Forgetters) Clear() {
	for _, f := range fs {
		f.Clear()
	}
}

// DefaultTailBytes bounds the newest turns (about 25,000 messages of 300
// bytes); DefaultKnowledgeBytes each of the facts and the summaries.
const DefaultTailBytes, DefaultKnowledgeBytes = 8 << 20, 4 << 20

// convKey names what Reads holds of a conversation, or of a user (Of "").
type convKey = Key[string]

// tailKeep is how many newest messages a tail grows to as saves append to
// it (a Recent asking for more keeps what it read).
const tailKeep = 64

// Reads keeps a store's Recent (under Revisions.Tail), Facts and
// LatestSummary in memory, and the prints of conversations' first messages
// (Head, under Revisions.Tail); its saves and erasures go through it. Each
// read takes its request's Revisions; nil (a failed lookup) reads through.
// It is safe for concurrent use.
type Reads struct {
	src       Store
	emb       Forgetter // what an erasure forgets of the user; nil: none
	tails     *Cache[convKey, tail]
	facts     *Cache[convKey, []memory.Fact]
	summaries *Cache[convKey, *memory.Summary] // nil: the conversation has none
	heads     *Cache[convKey, head]
}

// NewReads returns a Reads over src bounded at tailBytes of tails and
// knowledgeBytes each of facts, summaries and heads; an erasure makes emb
// forget the user (nil: none).
func NewReads(src Store, emb Forgetter, tailBytes, knowledgeBytes int) *Reads {
	return &Reads{src: src, emb: emb,
		tails:     New("recent", tailBytes, tailSize),
		facts:     New("facts", knowledgeBytes, factsSize),
		summaries: New("summaries", knowledgeBytes, summarySize),
		heads:     New("heads", knowledgeBytes, headSize)}
}

// tail is a conversation's newest live messages, oldest first (all: every
// live one), never modified once held: a save appends past its length.
type tail struct {
	msgs []memory.Message
	all  bool
}

// Recent returns what src's Recent does. The slice is the caller's; its
// messages' Raw is shared and must not be written to.
func (r *Reads) Recent(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Message, error) {
	if rev == nil || n <= 0 {
		return r.src.Recent(ctx, id, n)
	}
	key := convKey{id.Tenant, id.User, rev.Tail(), id.Conversation}
	epoch := r.tails.Epoch()
	if t, ok := r.tails.Get(key); ok && (len(t.msgs) >= n || t.all) {
		return slices.Clone(t.msgs[max(0, len(t.msgs)-n):]), nil
	}
	msgs, err := r.src.Recent(ctx, id, n)
	if err != nil {
		return nil, err
	}
	r.tails.PutSince(epoch, key, tail{msgs: slices.Clone(msgs), all: len(msgs) < n})
	return msgs, nil
}

// LatestSummary returns what src's LatestSummary does (that there is none
// is kept too). The summary is the caller's.
func (r *Reads) LatestSummary(ctx context.Context, rev *memory.Revisions, id memory.Identity) (memory.Summary, error) {
	if rev == nil {
		return r.src.LatestSummary(ctx, id)
	}
	key := convKey{id.Tenant, id.User, rev.Summaries, id.Conversation}
	epoch := r.summaries.Epoch()
	h, ok := r.summaries.Get(key)
	if !ok {
		sum, err := r.src.LatestSummary(ctx, id)
		if err != nil && !errors.Is(err, memory.ErrNotFound) {
			return memory.Summary{}, err
		} else if err == nil {
			h = &sum
		}
		r.summaries.PutSince(epoch, key, h)
	}
	if h == nil {
		return memory.Summary{}, fmt.Errorf("summary of %s: %w", id.Conversation, memory.ErrNotFound)
	}
	sum := *h
	for _, l := range []*[]string{&sum.KeyEvents, &sum.Preserved.Numbers, &sum.Preserved.Dates, &sum.Preserved.Decisions} {
		*l = slices.Clone(*l)
	}
	return sum, nil
}

// Facts returns what src's Facts does, the current ones (not history) from
// the user's unsuperseded facts held. The slice and its facts are the caller's.
func (r *Reads) Facts(ctx context.Context, rev *memory.Revisions, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	if rev == nil || history {
		return r.src.Facts(ctx, tenant, user, now, history)
	}
	key := convKey{tenant, user, rev.Facts, ""}
	epoch := r.facts.Epoch()
	live, ok := r.facts.Get(key)
	if !ok {
		all, err := r.src.Facts(ctx, tenant, user, now, true)
		if err != nil {
			return nil, err
		}
		live = slices.DeleteFunc(all, func(f memory.Fact) bool { return f.SupersededAt != nil })
		r.facts.PutSince(epoch, key, live)
	}
	out := slices.DeleteFunc(slices.Clone(live), func(f memory.Fact) bool { return !f.Current(now) })
	for i, f := range out {
		if f.ExpiresAt != nil {
			out[i].ExpiresAt = new(*f.ExpiresAt)
		}
	}
	return out, nil
}

// SaveExchange saves ex with the store and, saved, tells the tails (Saved).
func (r *Reads) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	e := r.epochs()
	res, err := r.src.SaveExchange(ctx, ex)
	if err == nil {
		r.saved(e, ex, res)
	}
	return res, err
}

// SaveExchanges saves exs with the store and, saved, tells the tails.
func (r *Reads) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	e := r.epochs()
	res, err := r.src.SaveExchanges(ctx, exs)
	if err == nil {
		for i, ex := range exs {
			r.saved(e, ex, res[i])
		}
	}
	return res, err
}

// Saved keeps, for the conversation's next Recent and Head, the tail and
// the head held at the Revisions.Tail just before ex's save
// (res.TailBefore, when TailKnown and nothing was superseded) with the
// stored messages appended, under the count the save left: a batch's
// saves of a conversation chain so.
func (r *Reads) Saved(ex memory.Exchange, res memory.SaveResult) {
	r.saved(r.epochs(), ex, res)
}

// savedEpochs are the tails' and the heads' Epoch before a save.
type savedEpochs struct{ tails, heads uint64 }

// epochs returns the tails' and the heads' Epoch, read before a save.
func (r *Reads) epochs() savedEpochs { return savedEpochs{r.tails.Epoch(), r.heads.Epoch()} }

// saved is Saved of a save begun at e: an erasure's Forget since then
// may have come after the save committed, and dropped what it stored;
// none of it is held again (PutSince).
func (r *Reads) saved(e savedEpochs, ex memory.Exchange, res memory.SaveResult) {
	if res.Inserted == 0 || !res.TailKnown || res.Superseded > 0 {
		return
	}
	before := convKey{ex.Tenant, ex.User, res.TailBefore, ex.Conversation}
	after := convKey{ex.Tenant, ex.User, res.TailBefore + int64(res.Inserted), ex.Conversation}
	if t, held := r.tails.Get(before); held {
		r.tails.PutSince(e.tails, after, appendStored(t, res.Stored))
	}
	if h, held := r.heads.Get(before); held {
		r.heads.PutSince(e.heads, after, h.extended(res.Stored))
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

// DeleteUser erases the user with the store and, failed or not, drops
// what r and the embeddings hold of them (Forget). It forgets them before
// the store's pass too, so that the calls in flight carrying their text
// (Calls, among the embeddings' Forgetters) are cancelled, and those of
// text read before refused, while it runs, not only once it is over.
func (r *Reads) DeleteUser(ctx context.Context, tenant, user string) error {
	r.Forget(tenant, user)
	err := r.src.DeleteUser(ctx, tenant, user)
	r.Forget(tenant, user)
	return err
}

// Forget drops what r and the embeddings hold of the user, erased here
// (DeleteUser) or by another process (its erasure notice): r's entries are
// stale already (the erasure moved the user's revisions), the embeddings'
// are not. r is a Forgetter.
func (r *Reads) Forget(tenant, user string) {
	r.tails.Forget(tenant, user)
	r.facts.Forget(tenant, user)
	r.summaries.Forget(tenant, user)
	r.heads.Forget(tenant, user)
	if r.emb != nil {
		r.emb.Forget(tenant, user)
	}
}

// Clear drops everything r and the embeddings hold.
func (r *Reads) Clear() {
	r.tails.Clear()
	r.facts.Clear()
	r.summaries.Clear()
	r.heads.Clear()
	if r.emb != nil {
		r.emb.Clear()
	}
}

// Collectors returns the Prometheus collectors of r's caches.
func (r *Reads) Collectors() []prometheus.Collector {
	return slices.Concat(r.tails.Collectors(), r.facts.Collectors(), r.summaries.Collectors(), r.heads.Collectors())
}

// tailSize, factsSize and summarySize are roughly what a held value
// takes, in bytes (a tail's messages share the identity's strings).
func tailSize(k convKey, t tail) int {
	return 64 + len(k.Of) + Sum(t.msgs, func(m memory.Message) int {
		return 160 + len(m.Key) + len(m.Role) + len(m.Content) + len(m.Raw)
	})
}

func factsSize(_ convKey, fs []memory.Fact) int {
	return 64 + Sum(fs, func(f memory.Fact) int { return 200 + len(f.Key) + len(f.Value) + len(f.Conversation) })
}

func summarySize(k convKey, h *memory.Summary) int {
	sum := cmp.Or(h, &memory.Summary{}) // nil: none
	lists := slices.Concat(sum.KeyEvents, sum.Preserved.Numbers, sum.Preserved.Dates, sum.Preserved.Decisions)
	return 200 + len(k.Of) + len(sum.Text) + Sum(lists, func(s string) int { return 16 + len(s) })
}
