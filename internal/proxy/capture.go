package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/dialect/responses"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// maxCaptureBytes caps the copy of a reply kept for capture; the reply
// itself streams through to the client whatever its size.
const maxCaptureBytes = 4 << 20

// teeDepth bounds the chunks waiting for a stream's capture goroutine.
const teeDepth = 256

// Reasons an exchange is not captured (the capture_skipped metric's label).
const (
	skipUnreadable = "unreadable"
	skipTooLarge   = "too_large"
	skipOverflow   = "overflow"
	skipShutdown   = "shutdown"
)

var (
	errCaptureTooLarge = errors.New("reply larger than the capture cap")
	errTeeOverflow     = errors.New("capture tee fell behind the stream")
)

// exchangeCapture is the capture of one memory-on exchange of any API: the
// upstream reply is copied as it is relayed, bounded and never blocking the
// client, read back by the API's reply reader or stream reassembler, and
// handed to the Capturer.
type exchangeCapture struct {
	p     *Proxy
	x     *server.Exchange
	api   *api
	id    memory.Identity
	model string
	// cut is what the exchange stores of the request's messages
	// (memory.CutRequest, made once for the request).
	cut memory.Cut
	// msgs are the request's messages, kept when cut left some out: the
	// Capturer checks those against the conversation
	// (memory.Exchange.Resent).
	msgs []memory.Message
	// at is when the request arrived: the exchange's time, so a request
	// that began before an erasure of its user counts as erased data even
	// when its reply ends after it.
	at time.Time
	// received is when the request arrived by the gateway's clock (at may
	// be the client's X-Memory-Timestamp), before memory was read for it:
	// the exchange's memory.Exchange.Received.
	received time.Time
	// candidate, derived, root and seed are the exchange's
	// memory.Exchange.Candidate, Derived, Root and BranchSeed.
	candidate string
	derived   bool
	root      string
	seed      string
	// transcript is the user's key in the prints of their exchanges
	// (transcriptKey), when the proxy keeps them; printsGen the count of
	// their forgets when the request arrived (transcripts.generation).
	transcript prefixKey
	printsGen  uint64
	// background: the request asked for a background response, which
	// goes on when its stream is cut off (pending.go).
	background bool
	// exID is the exchange's id, minted when it was first held as a
	// background response's (holdBackground): every copy of it held
	// carries it, so that storing it more than once finds it stored.
	exID string
	// headID is the id of a background stream's response, once its head
	// held the exchange (holdAtHead); headHeld says where.
	headID   string
	headHeld heldWhere
	// handedOff: forgetHeld handed the exchange held here to the store;
	// unheldSettled: unhold ended its head's hold here, its capture
	// settled. Both guarded by pending.mu (pendingResponses.unheld).
	handedOff, unheldSettled bool
	// noTools: the request offered no tools (memory.Request.NoTools).
	noTools bool
	// readOn decides whether the upstream is read on when the client
	// hangs up (hangup.go); nil for a background response.
	readOn *readOn
	// stream is set once a 2xx event stream arrived.
	stream *tee
	// done is set once the exchange was handed on or given up.
	done bool
}

// attach tees resp's body into the capture. A whole (non-stream) reply is
// read here, up to maxCaptureBytes, and handed to the Capturer before any
// of it is written to the client: a turn the client has an answer for is
// then durable (Capture returns once it is stored or queued), so a crash
// between the answer and the queue loses nothing. A read error fails the
// response before it starts (a 502), never a truncated 200. A whole
// reply left encoded (undecoded says why, see decode) is relayed as it
// is and not captured.
func (c *exchangeCapture) attach(ctx context.Context, resp *http.Response, undecoded error) error {
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" {
		if c.background {
			c.holdAtHead(ctx, resp)
		}
		c.stream = newTee(c.replyStream())
		if c.readOn != nil {
			c.readOn.watch(c.stream)
		}
		resp.Body = &teeBody{ReadCloser: resp.Body, t: c.stream, endLine: c.api.streamEnd,
			onEnd: func() { c.end(ctx) }, onUndecodable: c.undecodable}
		return nil
	}
	c.done = true
	if undecoded != nil {
		c.skipped(undecoded)
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxCaptureBytes+1))
	if err != nil {
		return fmt.Errorf("read upstream reply: %w", err)
	}
	if len(buf) > maxCaptureBytes {
		c.skipped(errCaptureTooLarge)
		resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
		return nil
	}
	resp.Body = readCloser{Reader: bytes.NewReader(buf), Closer: resp.Body}
	reply, usage, err := c.api.reply(buf)
	if errors.Is(err, responses.ErrNotDone) {
		// A background response: its answer comes later.
		created, err := responses.CreatedFromJSON(buf)
		if err != nil {
			c.skipped(err)
			return nil
		}
		switch where, lost := c.holdBackground(ctx, created.ID); {
		case lost != nil:
			c.skipped(lost)
		case c.degradedHold(where):
			c.p.addDegraded(resp.Header, c.x, memory.DegradedBackground)
		}
		return nil
	}
	if err != nil {
		c.skipped(err)
		return nil
	}
	if !c.capture(ctx, reply, usage) {
		// Written before its turn is durable: a crash loses the turn.
		c.p.addDegraded(resp.Header, c.x, memory.DegradedCapture)
	}
	return nil
}

// replyStream returns the reassembler of the exchange's streamed reply.
func (c *exchangeCapture) replyStream() replyStream {
	if c.noTools && !c.background && c.api.toollessStream != nil {
		return c.api.toollessStream()
	}
	return c.api.stream()
}

// readCloser reads from Reader and closes Closer.
type readCloser struct {
	io.Reader
	io.Closer
}

// end hands a stream's exchange to the Capturer once its events are
// reassembled, and returns when it is stored or queued. The stream's body
// calls it before the client gets the terminal event (or at the end of a
// stream that has none), so a stream the client saw complete is durable.
func (c *exchangeCapture) end(ctx context.Context) {
	if c.done || c.stream == nil {
		return
	}
	c.done = true
	c.readOn.ended()
	c.complete(ctx)
}

// complete reassembles the stream's reply and hands it on; the caller has
// set done, so abandon leaves the stream to it.
func (c *exchangeCapture) complete(ctx context.Context) {
	reply, usage, err := c.stream.result()
	if c.heldOn(err) {
		return
	}
	if err != nil {
		c.skipped(err)
		c.unhold(ctx, true)
		return
	}
	// The stream's head is gone: nothing to mark.
	c.unhold(ctx, c.capture(ctx, reply, usage))
}

// finish captures a stream whose body did not end it (on a goroutine that
// Proxy.Wait waits for); a whole reply was captured by attach already.
func (c *exchangeCapture) finish(ctx context.Context) {
	if c.done || c.stream == nil {
		return
	}
	// done is set here, not on the goroutine: the handler's deferred
	// abandon, which runs next, must not close the stream the goroutine
	// reads the result of.
	c.done = true
	if c.readOn.reading() {
		// The client hung up and the upstream ended without its
		// terminal event: stored by the rule of a hang-up.
		c.afterHangUp(ctx)
		return
	}
	if !c.p.captures.Go(func() { c.complete(ctx) }) {
		c.stream.abandon()
		c.skipped(errShutDown)
	}
}

// undecodable gives up the capture of a compressed stream that stopped
// decoding (err): the relay is aborted, and the turn, never answered
// whole, is counted as not captured.
func (c *exchangeCapture) undecodable(err error) {
	if c.done || c.stream == nil {
		return
	}
	c.done = true
	c.stream.abandon()
	c.skipped(err)
	c.unhold(context.Background(), true)
}

// abandon ends a stream's capture when the relay was aborted (the client
// hung up, or the upstream broke off) before the stream's body ended it. A
// reply the API's reassembler holds whole is captured all the same (on a
// goroutine that Proxy.Wait waits for): a client that stops reading once
// it has the whole answer (chat's finish_reason, before the usage chunk or
// [DONE]; Anthropic's stop_reason; a tool-less Responses request's message
// done) hung up with it, and it is stored as it is when the upstream ends
// the stream there. A reply cut off before that is dropped, uncounted: the
// client chose to stop it; a background response's, which goes on at the
// provider, is held until a GET returns it done (heldOn).
func (c *exchangeCapture) abandon(ctx context.Context) {
	// The place reserved when the upstream was read on after a hang-up
	// is given back once the exchange was stored (end), given up, or its
	// capture started in it (afterHangUp).
	defer func() { c.readOn.takeSlot()() }()
	if c.done || c.stream == nil {
		return
	}
	c.done = true
	c.afterHangUp(ctx)
}

// afterHangUp captures the reply the stream holds whole (on a goroutine
// that Proxy.Wait waits for), the stream being over without its terminal
// event: after the upstream was read on past the client's hang-up, the
// reply as it was whole when the client hung up (tee.resultAtHangUp), in
// the place reserved when the read began — the drain that ended it waits
// for the store.
func (c *exchangeCapture) afterHangUp(ctx context.Context) {
	result, run := c.stream.result, c.p.captures.Go
	if c.readOn.reading() {
		result = c.stream.resultAtHangUp
		slot := c.readOn.takeSlot()
		run = func(f func()) bool {
			go func() {
				defer slot()
				f()
			}()
			return true
		}
	}
	if !run(func() {
		if reply, usage, err := result(); err == nil {
			c.unhold(ctx, c.capture(ctx, reply, usage))
		} else if !c.heldOn(err) {
			c.unhold(ctx, true)
		}
	}) {
		c.stream.abandon()
		c.skipped(errShutDown)
	}
}

func (c *exchangeCapture) skipped(err error) {
	reason := skipUnreadable
	switch {
	case errors.Is(err, errCaptureTooLarge):
		reason = skipTooLarge
	case errors.Is(err, errTeeOverflow):
		reason = skipOverflow
	case errors.Is(err, errBackgroundLost):
		reason = skipBackgroundLost
	case errors.Is(err, errShutDown):
		reason = skipShutdown
	}
	c.p.m.captureDr.WithLabelValues(reason).Inc()
	c.p.log.LogAttrs(context.Background(), slog.LevelWarn, "exchange not captured",
		slog.String("request_id", c.x.ID()), slog.String("reason", reason), slog.String("error", err.Error()))
}

// capture hands a completed exchange to the Capturer, detached from the
// client's context so a hang-up never loses the turn, and reports whether
// it was settled (Capturer.Capture).
func (c *exchangeCapture) capture(ctx context.Context, reply memory.Message, usage *memory.Usage) bool {
	// The exchange's prints, for the app's requests about the chat: this
	// process's at once, the shared ones (one round trip, bounded) while
	// the Capturer takes the exchange, both before the client sees the
	// reply end.
	var shared chan error
	if t := c.p.transcripts; t != nil {
		if pp, ok := t.rememberSince(c.printsGen, c.transcript, c.cut.Turn, reply); ok && t.shared != nil {
			shared = make(chan error, 1)
			go func() { shared <- t.shareSince(context.WithoutCancel(ctx), c.printsGen, c.transcript, pp) }()
		}
	}
	defer func() {
		if shared == nil {
			return
		}
		if err := <-shared; err != nil {
			c.p.m.prints.WithLabelValues(printsWrite).Inc()
			c.p.log.LogAttrs(ctx, slog.LevelDebug, "exchange's prints not shared",
				slog.String("request_id", c.x.ID()), slog.String("error", err.Error()))
		}
	}()
	return c.p.captureReply(ctx, c.exchange(), reply, usage)
}

// exchange is the exchange c captures, its reply still to come.
func (c *exchangeCapture) exchange() memory.Exchange {
	id, requestID := c.x.ID(), ""
	if c.exID != "" {
		id, requestID = c.exID, c.x.ID()
	}
	return memory.Exchange{
		ID:        id,
		RequestID: requestID,
		Identity:  c.id,
		Model:     c.model,
		Prior:     c.cut.Prior,
		Turn:      c.cut.Turn,
		Skipped:   c.cut.Skipped,

		TurnSkipped: c.cut.TurnSkipped,
		At:          c.at,
		Received:    c.received,

		Candidate:  c.candidate,
		Derived:    c.derived,
		Root:       c.root,
		BranchSeed: c.seed,
		Resent:     c.resent(),
	}
}

// captureReply hands ex, with its reply, to the Capturer, detached from
// the client's context, and reports whether it was settled
// (Capturer.Capture).
func (p *Proxy) captureReply(ctx context.Context, ex memory.Exchange, reply memory.Message, usage *memory.Usage) bool {
	if usage != nil && usage.CachedTokens > 0 {
		p.m.providerCached.Add(float64(usage.CachedTokens))
		if p.deps.Cache != nil {
			p.deps.Cache.Cached(ex.Tenant, usage.CachedTokens)
		}
	}
	// A reply that goes on with the one the history ends with is stored
	// joined with it, in its place, as the client resends it; adoption
	// matches the history with that partial reply still in it.
	prior, joined, ok := memory.Prefilled(ex.Prior, ex.Turn, reply)
	if ok {
		last := ex.Prior[len(ex.Prior)-1]
		ex.Partial, reply = &last, joined
	}
	ex.Prior, ex.Reply, ex.Usage = prior, reply, usage
	return p.deps.Capturer.Capture(context.WithoutCancel(ctx), ex)
}

// resent is the request's whole history, when its cut left part of it
// out (memory.Exchange.Resent).
func (c *exchangeCapture) resent() memory.Resent {
	if c.cut.Skipped == 0 {
		return memory.Resent{}
	}
	return memory.Resent{Msgs: c.msgs}
}

// maxEndLine bounds the start of a line kept to recognise a stream's
// terminal event across reads; the markers are far shorter.
const maxEndLine = 64

// teeBody passes what is read through it to a tee. When the API names its
// terminal event (endLine), the bytes from that event's first line on are
// held back until the event is complete, onEnd has stored the exchange,
// and only then released: a client that saw the stream end has its turn
// stored. A stream without one is stored at its end, before the EOF.
type teeBody struct {
	io.ReadCloser
	t *tee
	// endLine reports whether a line (without its line ending) begins the
	// stream's terminal event; nil holds nothing back.
	endLine func(line []byte) bool
	onEnd   func()
	// onUndecodable is called once when the stream stops decoding (a read
	// error wrapping errBadEncoding, see decodedBody).
	onUndecodable func(error)

	line    []byte // the current line's start, up to maxEndLine bytes
	lineLen int    // the current line's length so far
	inEnd   bool   // the terminal event began
	ended   bool   // onEnd ran: the rest passes through untouched
	held    []byte // bytes read but not yet released
	err     error  // the upstream's error, returned after held
}

func (b *teeBody) Read(p []byte) (int, error) {
	for {
		if len(b.held) > 0 && (b.ended || b.err != nil) {
			n := copy(p, b.held)
			b.held = b.held[n:]
			return n, nil
		}
		if b.err != nil {
			return 0, b.err
		}
		if b.ended {
			return b.ReadCloser.Read(p)
		}
		n, err := b.ReadCloser.Read(p)
		if err != nil && b.onUndecodable != nil && errors.Is(err, errBadEncoding) {
			b.onUndecodable(err)
			b.onUndecodable = nil
		}
		chunk := p[:n]
		if n > 0 {
			b.t.feed(chunk)
		}
		if b.onEnd == nil {
			return n, err
		}
		cut, complete := b.scan(chunk)
		if err == io.EOF {
			complete = true
		}
		if complete {
			b.onEnd()
			b.ended = true
		}
		switch {
		case len(b.held) > 0 || (b.inEnd && cut < 0):
			// Holding since an earlier read: everything joins the hold.
			b.held = append(b.held, chunk...)
			b.err = err
			if !b.ended && len(b.held) > maxCaptureBytes {
				// A terminal event that never completes (an upstream
				// writing on after its marker without the blank line)
				// would hold without bound: past the capture cap no
				// capture waits for these bytes, so stop holding.
				b.onEnd()
				b.ended = true
			}
			if !b.ended && err == nil {
				continue
			}
		case b.ended || cut < 0:
			return n, err
		default:
			// The terminal event begins at cut and is not complete: release
			// what precedes it, hold the rest.
			b.held = append(b.held, chunk[cut:]...)
			b.err = err
			if cut > 0 {
				return cut, nil
			}
		}
	}
}

// scan follows chunk's lines: cut is where, in chunk, the terminal event's
// first line begins (0 when it began in an earlier chunk, -1 when it did
// not begin here), complete whether the event ended (its blank line).
func (b *teeBody) scan(chunk []byte) (cut int, complete bool) {
	cut = -1
	start := 0
	for {
		i := bytes.IndexByte(chunk[start:], '\n')
		if i < 0 {
			b.add(chunk[start:])
			return cut, false
		}
		b.add(chunk[start : start+i])
		full := len(b.line) == b.lineLen
		line := bytes.TrimSuffix(b.line, []byte("\r"))
		switch {
		case b.inEnd && full && len(line) == 0:
			return cut, true
		case !b.inEnd && full && b.endLine != nil && b.endLine(line):
			b.inEnd = true
			cut = max(0, start+i-b.lineLen)
		}
		b.line, b.lineLen = b.line[:0], 0
		start += i + 1
	}
}

// add appends a piece of the current line.
func (b *teeBody) add(piece []byte) {
	b.lineLen += len(piece)
	if room := maxEndLine + 1 - len(b.line); room > 0 {
		b.line = append(b.line, piece[:min(room, len(piece))]...)
	}
}
