package proxy

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/internal/server"
)

// hangUpReadOn is how long the upstream of a stream whose client hung up
// after a whole answer is read on by default (Options.HangUpReadOn).
const hangUpReadOn = 30 * time.Second

// Outcomes of reading on after a hang-up (the hangup_reads metric's
// label).
const (
	readOnCompleted = "completed"
	readOnTimeout   = "timeout"
	readOnBroken    = "broken"
	readOnShutdown  = "shutdown"
)

var (
	// errReadOnTimeout cancels an upstream read on past the bound.
	errReadOnTimeout = errors.New("upstream read on after the client hung up for too long")
	// errReleased cancels an upstream request once its response ended.
	errReleased = errors.New("upstream response ended")
)

// States of a readOn.
const (
	relaying  = iota // the client is there
	readingOn        // the client hung up, the upstream is read on
	settled          // the upstream was cancelled, or the response ended
)

// readOn decides, when the client of a memory-on stream hangs up, whether
// its upstream request is cancelled at once (the client stopped the answer
// midway: a stop button stops the billing) or read on, the bytes
// discarded, to its terminal event so that the exchange is stored as the
// upstream finished it: when the events relayed by then showed a whole
// answer (replyStream.HangUp) — chat's finish_reason, Anthropic's
// stop_reason, a Responses message (or function call) done. Reading on is
// bounded by Options.HangUpReadOn, by the capture cap, and by the proxy's
// drain at shutdown; past them, or when the upstream breaks off, the
// exchange is stored by the rule of a hang-up (tee.resultAtHangUp): as it
// was whole when the client left, else not at all.
//
// The upstream request goes out under a context detached from the
// client's (context.WithoutCancel) that readOn cancels itself; the
// reverse proxy relays as usual, through a writer that discards what it
// is given once the client is gone (finalWriter).
type readOn struct {
	p      *Proxy
	cancel context.CancelCauseFunc
	bound  time.Duration
	// stopClient stops the watch of the client's context.
	stopClient func() bool
	// kept is set once the upstream is read on, and stays set.
	kept atomic.Bool

	mu    sync.Mutex
	state int
	tee   *tee
	// timer and stopDrain end reading on (bound, drain); outcome is why
	// it ended, when known before the response did.
	timer     *time.Timer
	stopDrain func() bool
	outcome   string
	// slot is the place among the proxy's captures reserved when reading
	// on began (captureGroup.reserve), so that the drain that ends the
	// read waits for the exchange to be stored: given back once the
	// capture ran or was given up (exchangeCapture.abandon, which the
	// handler runs after release), or by the capture it was taken for
	// (afterHangUp); nil once taken.
	slot func()
}

// readOnAfterHangUp returns fr under an upstream context of its own,
// detached from the client's, and the readOn that cancels it, for c's
// exchange; the caller calls release when the reverse proxy is done.
func (p *Proxy) readOnAfterHangUp(client context.Context, fr *http.Request, c *exchangeCapture) (*readOn, *http.Request) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(fr.Context()))
	k := &readOn{p: p, cancel: cancel, bound: cmp.Or(p.opts.HangUpReadOn, hangUpReadOn)}
	k.stopClient = context.AfterFunc(client, func() { k.clientGone(context.Cause(client)) })
	c.readOn = k
	return k, fr.WithContext(ctx)
}

// watch gives k the tee of the exchange's stream, once it arrived.
func (k *readOn) watch(t *tee) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tee = t
}

// reading reports whether the upstream is read on after a hang-up (now
// or earlier).
func (k *readOn) reading() bool { return k != nil && k.kept.Load() }

// clientGone is called when the client is gone (cause: why): it keeps the
// upstream when the stream had shown a whole answer, and reports so; else
// it cancels the upstream request with cause. Shutdown's cancellation of
// the request cancels the upstream.
func (k *readOn) clientGone(cause error) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch k.state {
	case readingOn:
		return true
	case settled:
		return false
	}
	if !errors.Is(cause, server.ErrShutdown) && k.tee != nil && k.tee.hangUp() {
		if slot, stop, ok := k.p.captures.reserve(func() { k.stop(errShutDown, readOnShutdown) }); ok {
			k.state, k.stopDrain, k.slot = readingOn, stop, slot
			k.kept.Store(true)
			k.timer = time.AfterFunc(k.bound, func() { k.stop(errReadOnTimeout, readOnTimeout) })
			k.p.m.hangUpReading.Inc()
			return true
		}
	}
	k.state = settled
	k.cancel(cause)
	return false
}

// stop ends reading on (why: outcome) by cancelling the upstream request
// with cause.
func (k *readOn) stop(cause error, outcome string) {
	k.mu.Lock()
	if k.state == readingOn && k.outcome == "" {
		k.outcome = outcome
	}
	k.mu.Unlock()
	k.cancel(cause)
}

// takeSlot returns the place k reserved among the proxy's captures when it
// began reading on, for its taker to give back (k.slot); a no-op when k
// reserved none or it was taken.
func (k *readOn) takeSlot() func() {
	if k == nil {
		return func() {}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	slot := k.slot
	k.slot = nil
	if slot == nil {
		return func() {}
	}
	return slot
}

// ended notes that the stream reached its terminal event.
func (k *readOn) ended() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state == readingOn && k.outcome == "" {
		k.outcome = readOnCompleted
	}
}

// overCap cancels the upstream read on once the stream outgrew the
// capture cap: no capture waits for the rest.
func (k *readOn) overCap() {
	k.mu.Lock()
	lost := k.tee != nil && k.tee.gaveUp()
	k.mu.Unlock()
	if lost {
		k.stop(errCaptureTooLarge, readOnBroken)
	}
}

// release ends k once the reverse proxy is done: the upstream request is
// cancelled (its response is over) and reading on, if any, counted. It
// reports whether the client had hung up and the upstream was read on.
func (k *readOn) release() bool {
	k.stopClient()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state == readingOn {
		k.timer.Stop()
		k.stopDrain()
		k.p.m.hangUpReading.Dec()
		k.p.m.hangUpReads.WithLabelValues(cmp.Or(k.outcome, readOnBroken)).Inc()
	}
	k.state = settled
	k.cancel(errReleased)
	return k.kept.Load()
}
