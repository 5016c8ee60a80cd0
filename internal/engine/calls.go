package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// with calls f on the connected core, or answers ErrNotConnected.
func with[T any](e *Engine, f func(*Core) (T, error)) (T, error) {
	c := e.cur.Load()
	if c == nil {
		var zero T
		return zero, ErrNotConnected
	}
	return f(c)
}

// withRecall calls f on the connected core's recall manager, or answers
// ErrNotConnected (also when recall is off).
func withRecall[T any](e *Engine, f func(*Core) (T, error)) (T, error) {
	c := e.cur.Load()
	if c == nil || c.Recall == nil {
		var zero T
		return zero, ErrNotConnected
	}
	return f(c)
}

// none adapts a call that returns only an error to with.
type none struct{}

// Prepare assembles the prompt of a memory-on request. It first waits,
// briefly, for the conversation's previous turn to be stored — for at most
// half of what is left of ctx's deadline (100ms without one) — so a user
// who sends a turn a moment after the last answer finds it in the prompt;
// past the wait the prompt goes without it. The revision counters routing
// read for the request (req.Revisions) serve its reads unless a turn of
// its conversation was being stored then: they may be older than that
// turn, and are read again.
func (e *Engine) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	return with(e, func(c *Core) (memory.Prepared, error) {
		if waited, _ := c.waitStored(ctx, req.Identity); waited {
			req.Revisions = nil
		}
		return c.Prompt.Prepare(ctx, req)
	})
}

// waitStored waits for the turns of conversation id being stored, for at
// most half of what is left of ctx's deadline (100ms without one). It
// reports whether one was being stored, and whether none is when it
// returns (false when the wait was cut short).
func (c *Core) waitStored(ctx context.Context, id memory.Identity) (waited, idle bool) {
	wctx, cancel := briefly(ctx)
	defer cancel()
	waited, err := c.Capturer.Wait(wctx, id)
	return waited, err == nil
}

// briefly bounds a wait for turns being stored: at most half of what is
// left of ctx's deadline, 100ms without one.
func briefly(ctx context.Context) (context.Context, context.CancelFunc) {
	wait := 100 * time.Millisecond
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl) / 2
	}
	return context.WithTimeout(ctx, wait)
}

// Route returns where a request whose conversation was derived from its
// history goes on (see record.Router.Route, and its order): the derived
// one, or the branch of it that the history continues (or the
// conversation an earlier memgate derived for it, or a branch of that
// one), or, when that holds nothing, the conversation whose tail the
// history is a window of (record.Router.Continued: a client that cuts its
// history; the Routed is Continued, with no Root and no Seed). It first
// waits, briefly (as Prepare does), for turns of the derived conversation
// being stored, so that it compares with what they store, and, before it
// looks a window's reply up, for the user's turns being stored, so that
// it finds the turn answered just before. With no core connected, or no
// Router, it returns the zero Routed: the request stays where it is.
//
// The Routed's Revisions are the user's revision counters it read, for
// the request's Prepare (memory.Request.Revisions), when they are as
// current as Prepare would read them: the request stays in the derived
// conversation, whose turns were all stored when they were read (Prepare
// reads them again when a turn was being stored by then). Otherwise they
// are nil: a turn of the branch, or one the wait gave up on, could be
// stored between routing and Prepare, and Prepare's wait could not tell.
func (e *Engine) Route(ctx context.Context, id memory.Identity, msgs []memory.Message, cut memory.Cut) memory.Routed {
	c := e.cur.Load()
	if c == nil || c.Router == nil {
		return memory.Routed{}
	}
	_, idle := c.waitStored(ctx, id)
	routed, rev, empty := c.Router.Route(ctx, id, msgs, cut)
	if empty {
		if found := e.continued(ctx, c, id, cut); found != "" {
			return memory.Routed{Conversation: found, Continued: true}
		}
	}
	if idle && routed.Conversation == id.Conversation {
		routed.Revisions = rev
	}
	return routed
}

// continued is the conversation a request whose derived conversation holds
// nothing continues (record.Router.Continued), "" when none: it waits
// first, as waitStored does, for the user's turns being stored. A failed
// lookup is logged without contents and finds none.
func (e *Engine) continued(ctx context.Context, c *Core, id memory.Identity, cut memory.Cut) string {
	wctx, cancel := briefly(ctx)
	_ = c.Capturer.WaitUser(wctx, id.Tenant, id.User) // a wait given up on looks up what is stored
	cancel()
	found, err := c.Router.Continued(ctx, id, cut)
	if err != nil && e.log != nil {
		e.log.WarnContext(ctx, "looking up the conversation a cut history continues failed; staying in the derived one",
			"tenant", id.Tenant, "conversation", id.Conversation, "error", err)
	}
	return found
}

// Capture records a finished exchange, or drops and counts it while no
// core is connected. It reports whether the exchange was settled (see
// record.Capturer.Capture).
func (e *Engine) Capture(ctx context.Context, ex memory.Exchange) bool {
	c := e.cur.Load()
	if c == nil {
		e.dropped.Inc()
		return false
	}
	return c.Capturer.Capture(ctx, ex)
}

// Import records a batch of past exchanges (see record.Capturer.Import).
func (e *Engine) Import(ctx context.Context, exs []memory.Exchange) ([]record.Outcome, error) {
	return with(e, func(c *Core) ([]record.Outcome, error) { return c.Capturer.Import(ctx, exs) })
}

// Conversations lists a user's conversations.
func (e *Engine) Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error) {
	return with(e, func(c *Core) ([]memory.Conversation, error) { return c.Store.Conversations(ctx, tenant, user) })
}

// Conversation reads one conversation and its messages.
func (e *Engine) Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error) {
	var conv memory.Conversation
	msgs, err := with(e, func(c *Core) (ms []memory.Message, err error) {
		conv, ms, err = c.Store.Conversation(ctx, id)
		return ms, err
	})
	return conv, msgs, err
}

// ConversationPage reads one conversation and a page of its messages
// (memory.Page).
func (e *Engine) ConversationPage(ctx context.Context, id memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error) {
	var conv memory.Conversation
	msgs, err := with(e, func(c *Core) (ms []memory.Message, err error) {
		conv, ms, err = c.Store.ConversationPage(ctx, id, p)
		return ms, err
	})
	return conv, msgs, err
}

// DeleteConversation deletes one conversation, twice, for the reason
// DeleteUser erases twice: a store drops the exchanges received at or
// before a conversation's deletion (memory.Exchange.Received), but a turn
// received while the first deletion ran read what it deleted, and its
// exchange would be stored after it. The second deletion is dated after
// the first committed, so such a turn is dropped when it is saved, or
// deleted with what it saved; it finds the conversation gone, unless such
// a turn stored it again, and answers memory.ErrNotFound, which is not an
// error here. Then the conversation's exchanges still waiting in the
// capture and enrichment queues are purged from them
// (record.Capturer.PurgeDeleted), or, while the queues do not answer,
// left to a purge retried in the background (see EraseUser). A
// conversation the store does not hold
// yet (its turns all queued, or in flight) is deleted all the same: the
// store dates the deletion, so its turns in flight are dropped when they
// are saved, and its queued ones are purged; the call answers
// memory.ErrNotFound when there was nothing of it in the queues
// either, and also, with the purge pending, whenever the store held
// nothing of it (the queues could not say; the QueuePurge says Pending,
// and the deletion stands: turns of it still queued are refused, and
// purged once the queues answer). Last, once
// the queues have answered the purge, a few tombstones of conversations
// never stored that nothing can be refused by any more go
// (expireTombstones). The other processes are told once, after both
// deletions (Core.Notices).
func (e *Engine) DeleteConversation(ctx context.Context, id memory.Identity) error {
	_, err := e.EraseConversation(ctx, id)
	return err
}

// EraseConversation is DeleteConversation, and says what became of the
// conversation's entries in the queues (memory.QueuePurge).
func (e *Engine) EraseConversation(ctx context.Context, id memory.Identity) (memory.QueuePurge, error) {
	return with(e, func(c *Core) (memory.QueuePurge, error) {
		stored := c.Store.DeleteConversation(ctx, id)
		failed := stored
		if stored == nil || errors.Is(stored, memory.ErrNotFound) {
			if failed = c.Store.DeleteConversation(ctx, id); errors.Is(failed, memory.ErrNotFound) {
				failed = nil
			}
		}
		c.notify(id.Tenant, id.User)
		if failed != nil {
			return memory.QueuePurge{}, failed
		}
		purged, err := c.purgeDeleted(ctx, id)
		if err != nil {
			return memory.QueuePurge{}, err
		}
		if purged.Pending {
			// The queues did not answer: asking them for their oldest
			// entry would wait the same, so no tombstone goes this time.
			// Nothing stored, and the queues could not say whether they
			// hold any of it: not found, as when they hold none (the
			// deletion stands all the same, its purge pending).
			return memory.QueuePurge{Pending: true}, stored
		}
		if purged.Turns+purged.Enrichments == 0 {
			err = stored // nothing stored, nothing queued: not found
		}
		if err := c.expireTombstones(ctx); err != nil && e.log != nil {
			e.log.Warn("conversation tombstones not expired; the next deletion tries again", "err", err)
		}
		return memory.QueuePurge{Queued: purged.Turns}, err
	})
}

// expireTombstones deletes a few tombstones of conversations never stored
// that no turn can be refused by any more: deleted a life before now and
// before the capture queue's oldest entry (memory.TombstoneHorizon). When
// the queue cannot say, or the core has not reached the queue other
// processes share (QueueUnreachable), none goes.
func (c *Core) expireTombstones(ctx context.Context) error {
	if c.QueueUnreachable {
		return nil
	}
	var oldest time.Time
	if c.Capturer != nil {
		var err error
		if oldest, err = c.Capturer.QueuedSince(ctx); err != nil {
			return err
		}
	}
	if _, err := c.Store.ExpireTombstones(ctx, memory.TombstoneHorizon(time.Now(), oldest)); err != nil {
		return err
	}
	return nil
}

// purgeDeleted purges the queues of what the deletion of conversation id
// voids, as purgeErased does for an erasure, and returns what it removed.
func (c *Core) purgeDeleted(ctx context.Context, id memory.Identity) (record.Purged, error) {
	if c.Capturer == nil {
		return record.Purged{}, nil
	}
	at, err := dated(ctx, func(ctx context.Context) (time.Time, error) { return c.Store.DeletedAt(ctx, id) })
	if err != nil {
		return record.Purged{}, fmt.Errorf("conversation deleted, but not purged from the queues: %w", err)
	}
	return c.Capturer.PurgeDeleted(ctx, id, at), nil
}

// DeleteUser erases a user, twice. A store dates an erasure before it
// commits (once it holds the user's lock), and
// exchanges dated after that are stored; but a turn that arrives in
// between reads the memory being erased, and its exchange — whose answer
// may repeat what was erased — would be stored after the erasure. The
// second erasure is dated after the first committed, so after every read
// of what the first removed: such a turn is dropped when it is saved, or
// deleted with what it saved. (A turn arriving while the call runs is
// erased with it.) Then the user's exchanges still waiting in the capture
// and enrichment queues, which the store would refuse when they were
// processed, are purged from them (record.Capturer.PurgeErased), so
// their text does not outlive the call however long the backlog. The
// other processes are told once, after both erasures (Core.Notices).
func (e *Engine) DeleteUser(ctx context.Context, tenant, user string) error {
	_, err := e.EraseUser(ctx, tenant, user)
	return err
}

// EraseUser is DeleteUser, and says what became of the user's entries in
// the queues: how many of the user's turns it purged from the capture
// queue (answered, not yet stored, so counted among no stored rows; those
// stored and waiting for enrichment are), or that the purge is pending.
// The call waits for the purge while the queues answer; queues that stay
// silent (Redis unreachable: each command would wait out the client's
// timeouts) or fail leave it pending, retried in the background until
// they take it, and the call answers the erasure the store made. The
// entries still queued meanwhile are refused when a worker processes
// them: they are dated at or before the erasure.
func (e *Engine) EraseUser(ctx context.Context, tenant, user string) (memory.QueuePurge, error) {
	return with(e, func(c *Core) (memory.QueuePurge, error) {
		err := c.Store.DeleteUser(ctx, tenant, user)
		if err == nil {
			err = c.Store.DeleteUser(ctx, tenant, user)
		}
		c.notify(tenant, user)
		if err != nil {
			return memory.QueuePurge{}, err
		}
		return c.purgeErased(ctx, tenant, user)
	})
}

// notify tells the other processes, once, that the user was erased or
// one of their conversations deleted (Core.Notices): after both passes,
// failed or not, since a pass that failed may have removed some of it.
func (c *Core) notify(tenant, user string) {
	if c.Notices != nil {
		c.Notices.Publish(tenant, user)
	}
}

// purgeErased purges the queues of what the erasure of (tenant, user)
// voids (record.Capturer.PurgeErased). The erasure has committed, and
// with it the purge it owes (the store records it with the tombstone):
// the purge runs to its end even if the caller hangs up, and the store
// not saying when it erased the user (it went down) is an error saying
// that the user is erased but queued exchanges were not purged yet (they
// are dropped when processed, and purged by the Capturer's next sweep of
// the store's pending purges).
func (c *Core) purgeErased(ctx context.Context, tenant, user string) (memory.QueuePurge, error) {
	if c.Capturer == nil {
		return memory.QueuePurge{}, nil
	}
	at, err := dated(ctx, func(ctx context.Context) (time.Time, error) { return c.Store.ErasedAt(ctx, tenant, user) })
	if err != nil {
		return memory.QueuePurge{}, fmt.Errorf("user erased, but not purged from the queues: %w", err)
	}
	n := c.Capturer.PurgeErased(ctx, tenant, user, at)
	if n.Pending {
		return memory.QueuePurge{Pending: true}, nil
	}
	return memory.QueuePurge{Queued: n.Turns}, nil
}

// datedTimeout bounds the store's answer of when it erased a user or
// deleted a conversation, asked once the erasure has committed.
const datedTimeout = 2 * time.Minute

// dated asks the store when it erased or deleted, within datedTimeout,
// even if the caller hangs up: the erasure has committed, and its purge
// needs that time.
func dated(ctx context.Context, at func(context.Context) (time.Time, error)) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), datedTimeout)
	defer cancel()
	return at(ctx)
}

// ErasedAt reports when a user was last erased.
func (e *Engine) ErasedAt(ctx context.Context, tenant, user string) (time.Time, error) {
	return with(e, func(c *Core) (time.Time, error) { return c.Store.ErasedAt(ctx, tenant, user) })
}

// Users lists a tenant's users, most recently active first.
func (e *Engine) Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error) {
	return with(e, func(c *Core) ([]memory.UserActivity, error) { return c.Store.Users(ctx, tenant, match, limit) })
}

// Branches returns a conversation's superseded messages.
func (e *Engine) Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error) {
	return with(e, func(c *Core) ([]memory.Branch, error) { return c.Store.Branches(ctx, id, limit) })
}

// Summaries returns every summary version of a conversation.
func (e *Engine) Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error) {
	return with(e, func(c *Core) ([]memory.Summary, error) { return c.Store.Summaries(ctx, id) })
}

// Footprint counts what is stored of a user.
func (e *Engine) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	return with(e, func(c *Core) (memory.Footprint, error) { return c.Store.Footprint(ctx, tenant, user) })
}

// SetFactPinned pins or unpins a fact.
func (e *Engine) SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error {
	_, err := with(e, func(c *Core) (none, error) { return none{}, c.Store.SetFactPinned(ctx, tenant, user, id, pinned) })
	return err
}

// Savings reads a tenant's stored savings counters.
func (e *Engine) Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error) {
	return with(e, func(c *Core) ([]memory.SavingsBucket, error) { return c.Store.Savings(ctx, tenant, since) })
}

// AddSavings adds savings counts to the store.
func (e *Engine) AddSavings(ctx context.Context, bs []memory.SavingsBucket) error {
	_, err := with(e, func(c *Core) (none, error) { return none{}, c.Store.AddSavings(ctx, bs) })
	return err
}

// Facts lists a user's facts (history: superseded and expired too).
func (e *Engine) Facts(ctx context.Context, tenant, user string, history bool) ([]memory.Fact, error) {
	return withRecall(e, func(c *Core) ([]memory.Fact, error) { return c.Recall.Facts(ctx, tenant, user, history) })
}

// AddFact validates and records a fact.
func (e *Engine) AddFact(ctx context.Context, f memory.Fact) (memory.Fact, error) {
	return withRecall(e, func(c *Core) (memory.Fact, error) { return c.Recall.AddFact(ctx, f) })
}

// DeleteFact deletes one fact.
func (e *Engine) DeleteFact(ctx context.Context, tenant, user string, id int64) error {
	_, err := withRecall(e, func(c *Core) (none, error) { return none{}, c.Recall.DeleteFact(ctx, tenant, user, id) })
	return err
}

// Search returns the user's best memory items for query, best first.
func (e *Engine) Search(ctx context.Context, tenant, user, query string, topK int) ([]memory.Item, error) {
	return withRecall(e, func(c *Core) ([]memory.Item, error) { return c.Recall.Search(ctx, tenant, user, query, topK) })
}

// SearchIn is Search within one conversation ("" for all of them).
func (e *Engine) SearchIn(ctx context.Context, tenant, user, conversation, query string, topK int) ([]memory.Item, error) {
	return withRecall(e, func(c *Core) ([]memory.Item, error) {
		return c.Recall.SearchIn(ctx, tenant, user, conversation, query, topK)
	})
}

// BindState records that a provider state belongs to a tenant's user
// (memory.StateBinding); ErrNotConnected while the store is down.
func (e *Engine) BindState(ctx context.Context, b memory.StateBinding) error {
	_, err := with(e, func(c *Core) (none, error) { return none{}, c.Store.BindState(ctx, b) })
	return err
}

// BoundStates reports, for each provider state, whether it is bound to
// tenant's user and has not lapsed by now; ErrNotConnected while the
// store is down.
func (e *Engine) BoundStates(ctx context.Context, tenant, user string, sts []memory.ProviderState, now time.Time) ([]bool, error) {
	return with(e, func(c *Core) ([]bool, error) { return c.Store.BoundStates(ctx, tenant, user, sts, now) })
}

// HoldResponse keeps the exchange of background response id until a GET
// on any process returns it done (record.Capturer.Hold); ErrNotConnected
// while the store is down.
func (e *Engine) HoldResponse(ctx context.Context, ex memory.Exchange, id string) (int, error) {
	return with(e, func(c *Core) (int, error) { return c.Capturer.Hold(ctx, ex, id) })
}

// HeldResponse returns the owner of tenant's background response id
// held for user ("": any user of the tenant), or memory.ErrNotFound
// (record.Capturer.Held); ErrNotConnected while the store is down.
func (e *Engine) HeldResponse(ctx context.Context, tenant, user, id string) ([]byte, error) {
	return with(e, func(c *Core) ([]byte, error) { return c.Capturer.Held(ctx, tenant, user, id) })
}

// ClaimResponse takes tenant's background response id held for owner,
// once (record.Capturer.Claim); ErrNotConnected while the store is down.
func (e *Engine) ClaimResponse(ctx context.Context, tenant, id string, owner []byte) (memory.Exchange, error) {
	return with(e, func(c *Core) (memory.Exchange, error) { return c.Capturer.Claim(ctx, tenant, id, owner) })
}

// SettleResponse deletes tenant's background response id held for
// owner (record.Capturer.Settle); ErrNotConnected while the store is
// down.
func (e *Engine) SettleResponse(ctx context.Context, tenant, id string, owner []byte) error {
	_, err := with(e, func(c *Core) (struct{}, error) { return struct{}{}, c.Capturer.Settle(ctx, tenant, id, owner) })
	return err
}
