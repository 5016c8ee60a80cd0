package enrich

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// ConversationLeases grants each conversation's enrichment to one enricher
// at a time, across processes (redis.Leases, beside the Redis enrichment
// stream). Keys are opaque (a hash of the conversation's identity).
type ConversationLeases interface {
	// Lease takes or renews holder's lease on each key for ttl and
	// reports, per key, whether holder holds it now.
	Lease(ctx context.Context, holder string, ttl time.Duration, keys ...string) ([]bool, error)
	// Release gives up holder's leases on keys, those it holds.
	Release(ctx context.Context, holder string, keys ...string) error
}

// errLeaseLost ends a round's hooks when the leases on its conversations
// may have run out: another enricher may hold them from then on.
var errLeaseLost = errors.New("enrich: conversation lease lost")

// fenced reports whether ctx, a round's hooks' context, ended because its
// conversations' leases may have run out.
func fenced(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errLeaseLost) }

// claimed is a decoded delivery, with when this enricher first held it,
// its conversation's lease key (conversationKey), hashed once, and the
// erasures' count (cache.Epoch) taken before it was claimed (read: false
// when unknown), which its hooks' caches compare with their users'
// forgets (runHooks).
type claimed struct {
	d     memory.Delivery
	en    record.Enrichment
	since time.Time
	key   string
	epoch uint64
	read  bool
}

// holderToken names this enricher in the conversation leases: its
// consumer name and a random suffix, so that a process restarted under
// the same name (a container's host and pid 1) never renews or releases
// the leases of the run before it.
func holderToken(consumer string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return consumer + "/" + hex.EncodeToString(b[:])
}

// conversationKey is the lease key of a conversation: a hash of its
// identity, so that no id is written to the lease store.
func conversationKey(id memory.Identity) string {
	h := sha256.Sum256([]byte(id.Tenant + "\x00" + id.User + "\x00" + id.Conversation))
	return hex.EncodeToString(h[:16])
}

// admit takes the leases on the conversations of batch and returns the
// entries this round enriches (those of the conversations it holds now),
// the keys it holds, and when it asked for them. Of the others, held by
// another enricher: a fresh entry (first delivered to this enricher, and
// only it has it) is kept for the next rounds, for at most half of
// StaleAfter, so that it waits for the holder's round rather than for the
// queue's reclaim; a redelivered one (reclaimed from an enricher that
// went quiet past StaleAfter, which the holder is most likely enriching
// now) is left claimed and unacknowledged: the holder acknowledges it, or
// it goes stale again and is reclaimed once its conversation is free.
func (e *Enricher) admit(ctx context.Context, batch []claimed) (run []claimed, keys []string, at time.Time) {
	if len(batch) == 0 {
		return nil, nil, time.Time{}
	}
	// Each conversation's key once, however many of its entries batch has.
	idx := make(map[string]int, len(batch))
	var want []string
	for _, c := range batch {
		if _, ok := idx[c.key]; !ok {
			idx[c.key] = len(want)
			want = append(want, c.key)
		}
	}
	at = time.Now()
	held, err := e.opts.Conversations.Lease(ctx, e.holder, e.leaseTTL, want...)
	if err != nil {
		e.failures.WithLabelValues("lease").Inc()
		e.logger.Warn("enricher cannot lease its conversations; it waits", "conversations", len(want), "err", err)
		held = make([]bool, len(want))
	}
	for i, k := range want {
		if held[i] {
			keys = append(keys, k)
		}
	}
	now := e.clock()
	for _, c := range batch {
		switch {
		case held[idx[c.key]]:
			run = append(run, c)
		case c.d.Attempts <= 1 && now.Sub(c.since) < e.opts.StaleAfter/2:
			e.deferred = append(e.deferred, c)
		}
	}
	return run, keys, at
}

// takeDeferred returns the entries kept for this round and forgets them.
func (e *Enricher) takeDeferred() []claimed {
	out := e.deferred
	e.deferred = nil
	return out
}

// chunkConversations is how many conversations a round's hooks take at a
// time under conversation leases: a round that claimed a large backlog
// holds every conversation in it, and releases each part's as soon as it
// is done, so that another enricher holding their next turns (kept by
// admit) goes on meanwhile. The hooks still see each conversation's turns
// together, once per round.
const chunkConversations = 8

// chunks splits a round's entries (sorted by conversation) into parts of
// at most chunkConversations conversations; split false: one part.
func chunks(all []claimed, split bool) [][]claimed {
	if !split {
		return [][]claimed{all}
	}
	var out [][]claimed
	start, convs := 0, 0
	for i := range all {
		if i == 0 || all[i].en.Exchange.Identity != all[i-1].en.Exchange.Identity {
			if convs == chunkConversations {
				out = append(out, all[start:i])
				start, convs = i, 0
			}
			convs++
		}
	}
	return append(out, all[start:])
}

// partKeys are the lease keys of the conversations of part.
func partKeys(part []claimed) []string {
	var keys []string
	for _, c := range part {
		if !slices.Contains(keys, c.key) {
			keys = append(keys, c.key)
		}
	}
	return keys
}

// fence keeps a round's conversation leases: it renews them every quarter
// of their TTL while the round's hooks run, and ends the hooks' context
// (cause errLeaseLost) three quarters of the TTL after the start of the
// last renewal that held them all — before the store's clock lets them go
// — or at once when one is found taken. The hooks' writes under it
// therefore stop before another enricher can hold one of the
// conversations.
type fence struct {
	e      *Enricher
	cancel context.CancelCauseFunc
	ctx    context.Context
	timer  *time.Timer
	quit   chan struct{}
	done   chan struct{}

	mu   sync.Mutex // held while the leases are renewed or released
	keys []string   // the leases still held
}

// fence starts keeping the leases on keys, asked for at at, and returns
// the hooks' context, derived from ctx.
func (e *Enricher) fence(ctx context.Context, keys []string, at time.Time) (context.Context, *fence) {
	fctx, cancel := context.WithCancelCause(ctx)
	safe := e.leaseTTL * 3 / 4
	f := &fence{e: e, cancel: cancel, ctx: fctx, keys: keys, quit: make(chan struct{}), done: make(chan struct{})}
	f.timer = time.AfterFunc(time.Until(at.Add(safe)), func() { cancel(errLeaseLost) })
	go f.renew(ctx, safe)
	return fctx, f
}

// renew renews the leases until stop.
func (f *fence) renew(ctx context.Context, safe time.Duration) {
	defer close(f.done)
	e := f.e
	t := time.NewTicker(max(e.leaseTTL/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-f.quit:
			return
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		start := time.Now()
		var held []bool
		var err error
		if len(f.keys) > 0 {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), safe)
			held, err = e.opts.Conversations.Lease(rctx, e.holder, e.leaseTTL, f.keys...)
			rcancel()
		}
		f.mu.Unlock()
		switch {
		case err != nil:
			e.logger.Warn("enricher cannot renew its conversations' leases", "err", err)
		case slices.Contains(held, false):
			f.cancel(errLeaseLost)
			return
		default:
			f.timer.Reset(time.Until(start.Add(safe)))
		}
	}
}

// release gives up the leases on keys (a part of the round that is done
// and acknowledged), so that an enricher that kept those conversations'
// turns enriches them at once; they are no longer renewed.
func (f *fence) release(ctx context.Context, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = slices.DeleteFunc(f.keys, func(k string) bool { return slices.Contains(keys, k) })
	f.e.releaseConversations(ctx, keys)
}

// stop ends the renewal, gives up the leases still held and reports
// whether they were lost during the round.
func (f *fence) stop(ctx context.Context) (lost bool) {
	close(f.quit)
	<-f.done
	f.timer.Stop()
	lost = errors.Is(context.Cause(f.ctx), errLeaseLost)
	f.cancel(nil)
	f.release(ctx, slices.Clone(f.keys))
	return lost
}

// releaseConversations gives up the leases on keys.
func (e *Enricher) releaseConversations(ctx context.Context, keys []string) {
	if len(keys) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := e.opts.Conversations.Release(rctx, e.holder, keys...); err != nil {
		e.logger.Warn("enricher cannot give up its conversations' leases; they run out", "conversations", len(keys), "err", err)
	}
}

// readEpoch returns the earliest epoch part's entries were claimed at,
// and false if one's is unknown.
func readEpoch(part []claimed) (uint64, bool) {
	epoch := uint64(0)
	for i, c := range part {
		if !c.read {
			return 0, false
		}
		if i == 0 || c.epoch < epoch {
			epoch = c.epoch
		}
	}
	return epoch, len(part) > 0
}
