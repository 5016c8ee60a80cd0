package proxy

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/dialect/responses"
	"github.com/memgate/memgate/internal/memory"
)

// Background responses. A Responses request with background: true is
// answered at once, queued or in_progress, with no output: the answer
// comes later, to the client's GET /v1/responses/{id} (polled until the
// response is done, or streamed with stream=true). The exchange is held
// in the store every gateway process shares (Deps.Held: prepared and
// redacted as it will be stored, keyed by digests, bounded per tenant,
// lapsing after memory.HeldTTL) until a GET of the same tenant — by the
// exchange's user, or naming no user (the POST may have named its user
// in its body only, which a GET has not) — returns the response done, on
// any process: completed or incomplete, the process that saw it done
// claims the exchange, once, and stores it with that answer; cancelled or
// failed, the claim drops it. Only while the store does not take it
// (down, or no Deps.Held) is the exchange held here, in this process
// (the POST says X-Memory-Degraded: background), bounded (pendingMax,
// pendingMaxBytes) and expiring (pendingTTL). A turn answered later,
// given up for the bounds, or held by another process that restarted
// since, is not stored, and counted as background_lost.

const (
	// pendingMax bounds the background responses awaiting their answer.
	pendingMax = 1024
	// pendingMaxBytes bounds the messages their captures hold.
	pendingMaxBytes = 64 << 20
	// pendingTTL is how long a background response's capture waits for
	// its answer.
	pendingTTL = time.Hour
)

// skipBackgroundLost is the capture_skipped reason of a background
// response whose capture was given up before its answer came (evicted,
// expired, or too large to hold).
const skipBackgroundLost = "background_lost"

var errBackgroundLost = errors.New("the background response's capture was given up before its answer came")

// HeldResponses keeps the exchanges of background responses in the
// store every gateway process shares until a GET on any of them returns
// the response done (implemented by engine.Engine).
type HeldResponses interface {
	// HoldResponse keeps ex, the exchange of background response id,
	// prepared (redacted) as it will be stored; it returns how many held
	// exchanges it gave up (lapsed, or past the tenant's bounds).
	// memory.ErrErased: its user was erased since it arrived;
	// memory.ErrHeldDeleted: its conversation was deleted since;
	// memory.ErrHeldTooLarge: it is never held.
	HoldResponse(ctx context.Context, ex memory.Exchange, id string) (int, error)
	// HeldResponse returns the owner of tenant's response id held for
	// user ("": for any user of the tenant), or memory.ErrNotFound.
	HeldResponse(ctx context.Context, tenant, user, id string) ([]byte, error)
	// ClaimResponse takes tenant's response id held for owner under a
	// lease (memory.HeldLease), or memory.ErrNotFound (settled, under
	// another claim's lease, or erased); memory.ErrHeldLapsed when it
	// lapsed. It stays held until SettleResponse: a claimer that crashed,
	// or whose capture did not settle, leaves it to the next claim after
	// the lease, which stores it under the same exchange id.
	ClaimResponse(ctx context.Context, tenant, id string, owner []byte) (memory.Exchange, error)
	// SettleResponse deletes tenant's response id held for owner: its
	// turn is durable, or never to be stored.
	SettleResponse(ctx context.Context, tenant, id string, owner []byte) error
}

// pendingKey names a background response of a tenant (the provider never
// repeats an id).
type pendingKey struct{ tenant, id string }

// pendingEntry is one capture held in this process.
type pendingEntry struct {
	key     pendingKey
	user    string
	c       *exchangeCapture
	size    int
	expires time.Time
}

// pendingResponses holds the captures of background responses until
// their answer comes, oldest first. It is safe for concurrent use.
type pendingResponses struct {
	mu    sync.Mutex
	ll    *list.List // of *pendingEntry, oldest first
	m     map[pendingKey]*list.Element
	bytes int
	now   func() time.Time
	// lost counts a capture given up (evicted, expired, too large).
	lost func(c *exchangeCapture)
}

func newPendingResponses(now func() time.Time, lost func(*exchangeCapture)) *pendingResponses {
	return &pendingResponses{ll: list.New(), m: map[pendingKey]*list.Element{}, now: now, lost: lost}
}

// captureSize is about what c holds of the request's messages.
func captureSize(c *exchangeCapture) int {
	n := 0
	for _, ms := range [][]memory.Message{c.msgs, c.cut.Prior, c.cut.Turn} {
		for _, m := range ms {
			n += len(m.Raw) + len(m.Content) + 64
		}
	}
	return n
}

// hold keeps c until the answer of k's response comes, evicting the
// oldest captures past the bounds (and those expired), and reports
// whether it did: a capture larger than memory.HeldExchangeMaxBytes is
// not held, and evicts none.
func (p *pendingResponses) hold(k pendingKey, user string, c *exchangeCapture) bool {
	size := captureSize(c)
	if size > memory.HeldExchangeMaxBytes {
		return false
	}
	p.mu.Lock()
	var lost []*exchangeCapture
	if el, ok := p.m[k]; ok {
		p.remove(el) // the provider never repeats an id; keep the newest
	}
	now := p.now()
	for el := p.ll.Front(); el != nil; el = p.ll.Front() {
		e := el.Value.(*pendingEntry)
		if p.ll.Len() < pendingMax && p.bytes+size <= pendingMaxBytes && now.Before(e.expires) {
			break
		}
		p.remove(el)
		lost = append(lost, e.c)
	}
	p.m[k] = p.ll.PushBack(&pendingEntry{key: k, user: user, c: c, size: size, expires: now.Add(pendingTTL)})
	p.bytes += size
	p.mu.Unlock()
	for _, c := range lost {
		p.lost(c)
	}
	return true
}

// remove drops el; the caller holds mu.
func (p *pendingResponses) remove(el *list.Element) {
	e := p.ll.Remove(el).(*pendingEntry)
	delete(p.m, e.key)
	p.bytes -= e.size
}

// has reports whether k's response has a capture held for user ("":
// any user), not expired.
func (p *pendingResponses) has(k pendingKey, user string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.m[k]
	if !ok {
		return false
	}
	e := el.Value.(*pendingEntry)
	return (user == "" || e.user == user) && p.now().Before(e.expires)
}

// empty reports whether no capture is held.
func (p *pendingResponses) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ll.Len() == 0
}

// claim takes k's capture, once: nil when none is held (another GET
// claimed it, or it expired).
func (p *pendingResponses) claim(k pendingKey) *exchangeCapture {
	p.mu.Lock()
	el, ok := p.m[k]
	if !ok {
		p.mu.Unlock()
		return nil
	}
	p.remove(el)
	e := el.Value.(*pendingEntry)
	expired := !p.now().Before(e.expires)
	p.mu.Unlock()
	if expired {
		p.lost(e.c)
		return nil
	}
	return e.c
}

// drop drops k's capture, if held.
func (p *pendingResponses) drop(k pendingKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if el, ok := p.m[k]; ok {
		p.remove(el)
	}
}

// take removes the captures of tenant's user, and returns them with the
// ids of their responses.
func (p *pendingResponses) take(tenant, user string) []*pendingEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*pendingEntry
	for el := p.ll.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*pendingEntry); e.key.tenant == tenant && e.user == user {
			p.remove(el)
			out = append(out, e)
		}
		el = next
	}
	return out
}

// handOffTimeout bounds, in all, forgetHeld's hand-off to the store of
// the captures a forgotten user holds in this process (the store's
// OpTimeout, by default, for one of them): those not handed off by then
// are dropped, as with no store.
const handOffTimeout = 5 * time.Second

// forgetHeld drops the captures this process holds of tenant's user, who
// was erased or one of whose conversations was deleted (a notice says
// which user, not which): each is offered to the shared store, which
// refuses, as it refuses a save, one of a user erased since its request
// arrived or of a conversation deleted since, and holds the others (a
// GET on any process then stores them). Without a store, or while it
// does not answer (within handOffTimeout for them all), nothing tells
// them apart: all are dropped (counted background_lost), as nothing of
// an erased user may be kept. A live stream's head-held capture handed
// off is deleted from the store when its stream ends it (unhold).
func (p *Proxy) forgetHeld(tenant, user string) {
	taken := p.pending.take(tenant, user)
	if len(taken) == 0 || p.deps.Held == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
	defer cancel()
	for _, e := range taken {
		err := ctx.Err()
		given := 0
		if err == nil {
			given, err = p.deps.Held.HoldResponse(ctx, e.c.exchange(), e.key.id)
		}
		if given > 0 {
			p.m.captureDr.WithLabelValues(skipBackgroundLost).Add(float64(given))
		}
		switch {
		case err == nil:
			p.log.Debug("background response: exchange held in this process handed to the store on its user's forget", "request_id", e.c.x.ID())
			if p.pending.handedOff(e.c) {
				e.c.settleHeld(ctx, e.key.id)
			}
		case errors.Is(err, memory.ErrErased), errors.Is(err, memory.ErrHeldDeleted):
		default:
			e.c.skipped(fmt.Errorf("%w: its user forgotten while the store did not answer: %w", errBackgroundLost, err))
		}
	}
}

// handedOff notes that c, held here, was handed to the store, and
// reports whether its stream's head hold was already ended, its capture
// settled (unheld): the store's copy is then to be deleted.
func (p *pendingResponses) handedOff(c *exchangeCapture) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.handedOff = true
	return c.unheldSettled
}

// unheld ends the hold here of k, c's stream's head (settled: its capture
// settled, or it is never to be stored), and reports whether forgetHeld
// handed it to the store, whose copy is then the one to delete.
func (p *pendingResponses) unheld(k pendingKey, c *exchangeCapture, settled bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.handedOff {
		return true
	}
	if el, ok := p.m[k]; ok && el.Value.(*pendingEntry).c == c {
		p.remove(el)
	}
	c.unheldSettled = settled
	return false
}

// heldWhere is where holdBackground held an exchange.
type heldWhere int

const (
	// heldNowhere: not held, never to be stored (its user erased, its
	// conversation deleted, or it is too large to hold).
	heldNowhere heldWhere = iota
	// heldShared: in the store every process shares (Deps.Held).
	heldShared
	// heldHere: in this process (pending).
	heldHere
)

// holdBackground keeps c, whose reply is the background response id not
// done yet, until a GET returns it done: in the shared store (Deps.Held),
// else, while the store does not take it, in this process; and says
// where. An exchange too large to hold (memory.HeldExchangeMaxBytes) is
// held nowhere, and tooLarge says so: the caller counts it lost
// (capture_skipped too_large) when it is.
func (c *exchangeCapture) holdBackground(ctx context.Context, id string) (where heldWhere, tooLarge error) {
	held := c.p.deps.Held
	if c.exID == "" {
		// One id for every copy held (the store's, and this process's
		// when the store's answer was lost): stored twice, it is found
		// stored.
		c.exID = memory.NewExchangeID()
	}
	if held != nil {
		given, err := held.HoldResponse(context.WithoutCancel(ctx), c.exchange(), id)
		if given > 0 {
			c.p.m.captureDr.WithLabelValues(skipBackgroundLost).Add(float64(given))
		}
		switch {
		case err == nil:
			c.p.log.LogAttrs(ctx, slog.LevelDebug, "background response: exchange held in the store until its answer",
				slog.String("request_id", c.x.ID()))
			return heldShared, nil
		case errors.Is(err, memory.ErrErased), errors.Is(err, memory.ErrHeldDeleted):
			c.p.log.LogAttrs(ctx, slog.LevelDebug, "background response: user erased or conversation deleted since the request arrived; exchange not held",
				slog.String("request_id", c.x.ID()))
			return heldNowhere, nil
		case errors.Is(err, memory.ErrHeldTooLarge):
			return heldNowhere, fmt.Errorf("%w: %w", errCaptureTooLarge, err)
		}
		c.p.log.LogAttrs(ctx, slog.LevelWarn, "background response: the store did not take its exchange; held in this process only",
			slog.String("request_id", c.x.ID()), slog.String("error", err.Error()))
	}
	if !c.p.pending.hold(pendingKey{tenant: c.id.Tenant, id: id}, c.id.User, c) {
		return heldNowhere, fmt.Errorf("%w: %w", errCaptureTooLarge, memory.ErrHeldTooLarge)
	}
	c.p.log.LogAttrs(ctx, slog.LevelDebug, "background response: exchange held in this process until its answer",
		slog.String("request_id", c.x.ID()))
	return heldHere, nil
}

// degradedHold reports whether where is this process though a shared
// store is configured (degraded: only a GET reaching this process
// stores it).
func (c *exchangeCapture) degradedHold(where heldWhere) bool {
	return where == heldHere && c.p.deps.Held != nil
}

// closeHook calls onClose when the body is closed, before closing it.
type closeHook struct {
	io.ReadCloser
	onClose func()
}

func (b closeHook) Close() error {
	b.onClose()
	return b.ReadCloser.Close()
}

// heldOn holds c when its stream, err, was cut off before its background
// response was done (the response goes on at the provider), unless its
// head held it already (holdAtHead), and reports whether it is held.
func (c *exchangeCapture) heldOn(err error) bool {
	if !c.background || !errors.Is(err, responses.ErrNotDone) {
		return false
	}
	if c.headID != "" {
		return true
	}
	s, ok := c.stream.reply.(*responses.Stream)
	if !ok || s.ID() == "" {
		return false
	}
	where, lost := c.holdBackground(context.Background(), s.ID())
	switch {
	case lost != nil:
		c.skipped(lost)
	case c.degradedHold(where):
		c.p.m.degraded.WithLabelValues(memory.DegradedBackground).Inc()
	}
	return true
}

// backgroundGet is a GET /v1/responses/{id} of a background response
// whose exchange is held for the caller: in the shared store (owner, its
// owner's key there), or in this process (owner nil).
type backgroundGet struct {
	p     *Proxy
	key   pendingKey
	owner []byte
}

// responseGet returns the id of the response r GETs (GET
// /v1/responses/{id}), if it is one.
func responseGet(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet {
		return "", false
	}
	id, ok := strings.CutPrefix(r.URL.Path, responsesPath+"/")
	return id, ok && id != "" && !strings.Contains(id, "/")
}

// backgroundGetOf returns the backgroundGet of r, a passthrough request
// of tenant's user, or nil: r is no GET of a response held for them. A
// GET naming no user (user "") gets the response held for any user of
// the tenant: the POST may have named its user in its body only. That
// reads nothing of what is held, and stores, for the user the POST
// named, only the answer the provider gave that GET for the POST's own
// response — what the user's own GET would store.
func (p *Proxy) backgroundGetOf(r *http.Request, tenant, user string) *backgroundGet {
	id, ok := responseGet(r)
	if !ok || p.deps.Resolver == nil {
		return nil
	}
	k := pendingKey{tenant: tenant, id: id}
	if held := p.deps.Held; held != nil {
		ctx, cancel := context.WithTimeout(r.Context(), cmp.Or(p.opts.LoadTimeout, time.Second))
		owner, err := held.HeldResponse(ctx, tenant, user, id)
		cancel()
		if err == nil {
			return &backgroundGet{p: p, key: k, owner: owner}
		}
		if !errors.Is(err, memory.ErrNotFound) {
			p.m.degraded.WithLabelValues(memory.DegradedBackground).Inc()
			p.log.LogAttrs(r.Context(), slog.LevelDebug, "background response: the store of held exchanges did not answer; only this process's are looked up",
				slog.String("error", err.Error()))
		}
	}
	if !p.pending.has(k, user) {
		return nil
	}
	return &backgroundGet{p: p, key: k}
}

// done captures the held exchange with the answer of a GET, reply (or
// err reading it), once the response is done: completed or incomplete,
// it is captured, before the client gets the reply; cancelled or
// failed (responses.ErrEnded), the held capture is dropped. A response
// not done yet, or a reply that cannot tell, keeps it held.
func (g *backgroundGet) done(ctx context.Context, reply memory.Message, usage *memory.Usage, err error) {
	if err != nil && !errors.Is(err, responses.ErrEnded) {
		return
	}
	if g.owner != nil {
		g.doneShared(ctx, reply, usage, err)
		return
	}
	c := g.p.pending.claim(g.key)
	if c == nil {
		return // claimed by another GET, or expired
	}
	if err != nil {
		g.p.log.LogAttrs(ctx, slog.LevelDebug, "background response ended without an answer: exchange not captured",
			slog.String("request_id", c.x.ID()), slog.String("error", err.Error()))
		return
	}
	c.capture(ctx, reply, usage)
}

// doneShared is done for an exchange held in the shared store: the claim
// leases it, whichever process (or GET) sees the response done first, and
// the exchange is deleted once its capture settled; a claim the store
// does not answer leaves it held for the next GET, a capture that did not
// settle (or a crash) for the next GET after the lease.
func (g *backgroundGet) doneShared(ctx context.Context, reply memory.Message, usage *memory.Usage, err error) {
	ex, cerr := g.p.deps.Held.ClaimResponse(context.WithoutCancel(ctx), g.key.tenant, g.key.id, g.owner)
	switch {
	case errors.Is(cerr, memory.ErrNotFound):
		return // claimed by another GET, or erased
	case errors.Is(cerr, memory.ErrHeldLapsed):
		g.p.m.captureDr.WithLabelValues(skipBackgroundLost).Inc()
		return
	case cerr != nil:
		g.p.m.degraded.WithLabelValues(memory.DegradedBackground).Inc()
		g.p.log.LogAttrs(ctx, slog.LevelWarn, "background response done, but its held exchange could not be claimed; it waits for the next GET",
			slog.String("error", cerr.Error()))
		return
	}
	// A copy held in this process too (the hold's answer was lost) is
	// the same exchange: this claim settles it.
	g.p.pending.drop(g.key)
	if err != nil {
		g.p.log.LogAttrs(ctx, slog.LevelDebug, "background response ended without an answer: exchange not captured",
			slog.String("request_id", ex.RequestID), slog.String("error", err.Error()))
		g.settle(ctx)
		return
	}
	if !g.p.captureReply(ctx, ex, reply, usage) {
		g.p.log.LogAttrs(ctx, slog.LevelWarn, "background response done, but its exchange is not durable yet; it stays held for a claim after the lease",
			slog.String("request_id", ex.RequestID))
		return
	}
	g.settle(ctx)
}

// settle deletes the shared store's held exchange g claimed; one the
// store does not delete is claimed again after the lease and found
// stored.
func (g *backgroundGet) settle(ctx context.Context) {
	if err := g.p.deps.Held.SettleResponse(context.WithoutCancel(ctx), g.key.tenant, g.key.id, g.owner); err != nil {
		g.p.log.LogAttrs(ctx, slog.LevelDebug, "background response: held exchange not deleted; it is claimed again after the lease",
			slog.String("error", err.Error()))
	}
}

// attach reads a GET's reply for the held capture: a whole JSON reply
// is read here, up to maxCaptureBytes, and the exchange captured (done)
// before any of it is written to the client; a stream (stream=true) is
// reassembled as it is relayed, and the exchange captured before the
// client gets its terminal event (as a memory-on stream's). A larger
// reply, or a stream cut off, is relayed and keeps the capture held.
func (g *backgroundGet) attach(ctx context.Context, resp *http.Response) error {
	if eventStream(resp) {
		api := g.p.responses
		t := newTee(api.stream())
		ended := false
		end := func() {
			if ended {
				return
			}
			ended = true
			reply, usage, err := t.result()
			if err == nil && reply.Failed() {
				err = responses.ErrEnded
			}
			g.done(ctx, reply, usage, err)
		}
		stop := func() {
			if !ended {
				ended = true
				t.abandon()
			}
		}
		body := &teeBody{ReadCloser: resp.Body, t: t, endLine: api.streamEnd, onEnd: end, onUndecodable: func(error) { stop() }}
		resp.Body = closeHook{ReadCloser: body, onClose: stop}
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxCaptureBytes+1))
	if err != nil {
		return fmt.Errorf("read upstream reply: %w", err)
	}
	if len(buf) > maxCaptureBytes {
		resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
		return nil
	}
	resp.Body = readCloser{Reader: bytes.NewReader(buf), Closer: resp.Body}
	reply, usage, err := responses.ReplyFromJSON(buf)
	g.done(ctx, reply, usage, err)
	return nil
}
