package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// Preparer assembles the prompt of a memory-on request of any API, as chat
// messages (implemented by internal/engine/prompt).
type Preparer interface {
	Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error)
}

// Capturer takes a finished exchange; it must not block (implemented by
// internal/engine/record). It reports whether the exchange was settled
// (durable, or discarded for its user's erasure) when it returned.
type Capturer interface {
	Capture(ctx context.Context, ex memory.Exchange) bool
}

// Router places a request that names no conversation and resends its
// history, whose conversation id.Conversation was derived from it, in the
// branch of that conversation its history continues (or in the one an
// earlier memgate derived for it), or, when that holds nothing and the
// history is a window of another conversation's tail (a client that cuts
// its history), in that conversation (Routed.Continued), and returns
// where, with the branch seed its exchange carries (none when Continued)
// (implemented by internal/engine). It never fails: when it cannot tell
// (the zero Routed), the request stays in id.Conversation. It returns the
// user's revision counters it read too when they may serve the request's
// Prepare (memory.Routed.Revisions; nil: Prepare reads them). cut is the
// request's memory.Cut of msgs: it compares what the request's exchange
// stores.
type Router interface {
	Route(ctx context.Context, id memory.Identity, msgs []memory.Message, cut memory.Cut) memory.Routed
}

// IdentityResolver maps a request to its identity and memory mode
// (implemented by internal/identity). RequireKey reports whether gateway keys are
// configured, in which case every /v1 route checks them and the client's
// Authorization never goes upstream.
type IdentityResolver interface {
	Resolve(h http.Header, bodyUser string) (memory.Identity, memory.Mode, error)
	RequireKey() bool
}

// identify resolves the request's identity and mode. Without a resolver
// memory is off. A refused gateway key is recorded on the request's
// Exchange, for the failed-key limiter.
func (p *Proxy) identify(r *http.Request, bodyUser string) (memory.Identity, memory.Mode, *apierr.Error) {
	if p.deps.Resolver == nil {
		return memory.Identity{}, memory.ModeOff, nil
	}
	id, mode, err := p.deps.Resolver.Resolve(r.Header, bodyUser)
	if err != nil {
		if identity.Refused(err) {
			server.ExchangeOf(r.Context()).AuthFailed()
		}
		return id, mode, identity.APIError(err)
	}
	return id, mode, nil
}

// conversationFor is where a memory-on request that names no
// conversation goes (see memory.ImpliedConversation): the conversation
// derived from its history, or where the Router places it (a branch of
// it, whose Root it names, or the conversation its cut history continues
// rather than derives: memory.Routed.Continued, whose exchange is stored
// there as a named conversation's is), with the branch seed its exchange
// carries (empty in the user's default conversation, and when
// Continued), and the revision counters routing read for the request's
// Prepare (Revisions; nil: none): a derived conversation goes through
// the Router, within LoadTimeout. cut is the request's memory.Cut of
// msgs.
func (p *Proxy) conversationFor(ctx context.Context, id memory.Identity, msgs []memory.Message, cut memory.Cut) memory.Routed {
	conv := memory.ImpliedConversation(id.Tenant, id.User, msgs)
	if conv == memory.DefaultConversation {
		return memory.Routed{Conversation: conv}
	}
	derived := memory.Routed{Conversation: conv, Seed: memory.BranchSeed(id.Tenant, id.User, msgs)}
	if p.deps.Router == nil {
		return derived
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.LoadTimeout)
	defer cancel()
	did := id
	did.Conversation = conv
	routed := p.deps.Router.Route(ctx, did, msgs, cut)
	if routed.Conversation == "" {
		derived.Revisions = routed.Revisions
		return derived
	}
	return routed
}

// newChat reports whether a request naming no conversation that went to
// conv is a new chat's first turn (memory.Request.NewChat): it landed in
// the default conversation and its user was seen resending their
// history by this process; when this process cannot tell and the
// processes share the signal, it returns the question Prepare asks of
// theirs beside its loads (memory.Request.AskNewChat). A request going
// elsewhere resent its history, which is recorded for the user's next.
func (p *Proxy) newChat(id memory.Identity, conv string) (bool, func(context.Context) (bool, error)) {
	if conv != memory.DefaultConversation {
		p.resenders.seen(id.Tenant, id.User)
		return false, nil
	}
	if p.resenders.resends(id.Tenant, id.User) {
		return true, nil
	}
	return false, p.resenders.ask(id.Tenant, id.User)
}

// prepareResult is one Prepare call's outcome.
type prepareResult struct {
	p   memory.Prepared
	err error
}

// prepareWithin calls Prepare under LoadTimeout and stops waiting when the
// deadline passes even if Prepare ignores its context. The Preparer leaves
// out, on its own, the parts that are late (Prepared.Degraded); this
// deadline only bounds one that hangs as a whole.
func (p *Proxy) prepareWithin(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	start := time.Now()
	defer func() { p.m.prepare.Observe(time.Since(start).Seconds()) }()
	ctx, cancel := context.WithTimeout(ctx, p.opts.LoadTimeout)
	defer cancel()
	done := make(chan prepareResult, 1)
	go func() {
		prep, err := p.deps.Preparer.Prepare(ctx, req)
		done <- prepareResult{prep, err}
	}()
	select {
	case r := <-done:
		if r.err == nil && len(r.p.Messages) == 0 {
			r.err = errors.New("prepare returned no messages")
		}
		return r.p, r.err
	case <-ctx.Done():
		return memory.Prepared{}, ctx.Err()
	}
}

// handleMemory returns the handler of a's POST route, the one memory path
// of every API: read the body and let a's adapter parse it (a 400 in a's
// error shape when it breaks a's rules), resolve the identity, let the
// Preparer assemble the prompt and the adapter render it (degrading to the
// client's body on failure), forward through the reverse proxy and capture
// the exchange. When memory does not rewrite the request the client's body
// goes upstream byte for byte.
//
// What the exchange stores of the request's messages (memory.CutRequest
// with Options.MaxHistory) is computed here, once, and handed to
// everything that must agree on it: the check of the messages that may be
// stored (dialect.Request.Memory), X-Memory-Degraded: capture
// (markUnstored), routing, and the exchange the Capturer stores.
//
// Whether the request is about its conversation rather than a turn of it
// (auxiliary) is answered at once by this process's prints; when the
// answer needs the prints the processes share, their read runs beside
// routing and Prepare, and the answer is taken before the prompt is
// rendered, the request forwarded or its exchange set to be captured: a
// request about the conversation goes as sent, the memory loaded for it
// unused.
func (p *Proxy) handleMemory(a *api) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, w := c.Request(), c.Response()
		fail := func(e *apierr.Error) error {
			a.writeError(w, e)
			return nil
		}
		x := server.ExchangeOf(r.Context())
		// The headers (the gateway key, the identity) are resolved once,
		// before the body: a request they refuse is refused before its
		// body (up to MaxBodyBytes, read for up to
		// apierr.BodyReadTimeout) takes any of the gateway's memory. The
		// body's user names the user only when no header does (below).
		id, mode, aerr := p.identify(r, "")
		if aerr != nil {
			return fail(aerr)
		}
		if aerr := encodedBody(r); aerr != nil {
			return fail(aerr)
		}
		raw, aerr := apierr.ReadBody(w, r, p.opts.MaxBodyBytes)
		if aerr != nil {
			return fail(aerr)
		}
		req, aerr := dialect.Parse(a.name, raw)
		if aerr != nil {
			return fail(aerr)
		}
		if p.deps.Resolver != nil {
			id = identity.WithBodyUser(id, req.User)
		}
		// The user's key in the prints of their exchanges, read by the
		// check below and written by capture (zero when off).
		var tk prefixKey
		var tgen uint64
		if p.transcripts != nil && id.User != "" {
			tk, tgen = transcriptKey(id.Tenant, id.User), p.transcripts.generation()
		}
		// Whether the request is about its conversation rather than a turn
		// of it. An answer that waits on the prints the processes share
		// is taken after the memory loads, which run meanwhile as for a
		// turn; until then nothing is rendered, forwarded or captured.
		aux := p.auxiliary(r.Context(), tk, id, mode, req.Messages, w.Header(), x, string(a.name))
		if aux.ready() && aux.take(r.Context()) {
			mode = memory.ModeOff
		}
		// With the operator's key, the provider would hand any tenant the
		// history of a state another created: only the caller's own go.
		shared := p.sharedKey(a)
		if shared {
			if req.AmbiguousStates != nil {
				return fail(req.AmbiguousStates)
			}
			if aerr := p.checkStates(r.Context(), id, req.States, req.RequiredIDs, req.CarriedIDs, unknownState, req.DropIDs); aerr != nil {
				return fail(aerr)
			}
		}
		// What the exchange stores: read by the key check and capture when
		// the request stores, and by routing (its Head) when the request
		// names no conversation, in any mode that reads or writes memory.
		plan := func() (memory.Cut, memory.Request, *apierr.Error) {
			var cut memory.Cut
			if id.User != "" && (mode.Stores() || mode.Injects() && id.Conversation == "") {
				cut = memory.CutRequest(req.Messages, p.opts.MaxHistory)
			}
			mreq, aerr := req.Memory(r.Header, id, mode, cut)
			return cut, mreq, aerr
		}
		cut, mreq, aerr := plan()
		if aerr != nil && !aux.taken && aux.take(r.Context()) {
			// Refused as a turn that would be stored (a message giving
			// a key twice), the request is about the conversation: it
			// stores nothing, and goes as sent.
			mode = memory.ModeOff
			cut, mreq, aerr = plan()
		}
		if aerr != nil {
			return fail(aerr)
		}
		received := time.Now()
		at, aerr := saidAt(r.Header, received)
		if aerr != nil {
			return fail(aerr)
		}
		mreq.At = at
		breakpoints, aerr := p.cacheBreakpoints(r.Header)
		if aerr != nil {
			return fail(aerr)
		}
		f := &forward{x: x, api: a, memory: true, tenant: id.Tenant, model: req.Model}
		switch {
		case shared && a.name == dialect.Responses && !req.Stateless:
			f.bind = p.newBind(x, id, memory.StateResponse, received)
		case shared && a.name == dialect.Responses:
			// Kept nowhere, the response cannot be named again; its
			// items come back with their ids (a reasoning item's
			// following item is paired with it by id), which stay
			// the caller's to send (dropForeignIDs).
			f.bind = p.itemsBind(x, id)
		case shared && a.name == dialect.Messages:
			// The container its code execution ran in, the files
			// its code wrote.
			f.bind = p.containerBind(x, id)
		}
		out := req.Raw
		// A Responses request may hold nothing memory can read (only item
		// references, continuing a stored response).
		withMemory := id.User != "" && mode != memory.ModeOff && len(req.Messages) > 0
		implied, injects := id.Conversation == "", mode.Injects() && p.deps.Preparer != nil
		var routed memory.Routed
		var prep prepareResult
		if withMemory {
			if implied {
				routed = p.conversationFor(r.Context(), id, req.Messages, cut)
				id.Conversation, mreq.Revisions = routed.Conversation, routed.Revisions
				mreq.Identity, mreq.Root = id, routed.Root
				mreq.NewChat, mreq.AskNewChat = p.newChat(id, routed.Conversation)
			}
			if injects {
				req.SetCacheBreakpoints(breakpoints)
				prep.p, prep.err = p.prepareWithin(r.Context(), mreq)
			}
		}
		if aux.take(r.Context()) {
			// About the conversation after all (the shared prints, read
			// while the memory loaded, told it): that memory goes unused.
			withMemory = false
		}
		if withMemory {
			w.Header()["X-Memory-Conversation"] = []string{id.Conversation}
			if injects {
				out = p.inject(r.Context(), w.Header(), x, req, mreq, prep)
			}
			// An instruction of the app's after the chat's last reply
			// (memory.Instructed) is no turn of the chat: not stored.
			if mode.Stores() && p.deps.Capturer != nil && !memory.Instructed(req.Messages) {
				p.markUnstored(w.Header(), x, cut)
				f.capture = &exchangeCapture{p: p, x: x, api: a, id: id, model: req.Model, cut: cut, msgs: req.Messages, at: at, received: received, transcript: tk, printsGen: tgen,
					background: req.Background, noTools: req.NoTools}
				if implied {
					// A full-history chat's first turn, stored in the
					// default conversation, joins the chat's derived
					// conversation (or the branch of it the chat went
					// on in) when the chat goes on; a turn of a derived
					// conversation is stored in the branch its history
					// continues when it is saved (BranchSeed). A turn
					// continuing the conversation its cut history is a
					// window of is stored there as a named
					// conversation's is, aligned with its tail.
					f.capture.derived = id.Conversation != memory.DefaultConversation
					f.capture.candidate = memory.Candidate(id.Tenant, id.User, req.Messages)
					f.capture.root = routed.Root
					if f.capture.derived {
						f.capture.seed = routed.Seed // none when Continued
					}
				}
				defer f.capture.abandon(r.Context())
			}
		}
		if aux.readErr() != nil {
			p.addDegraded(w.Header(), x, memory.DegradedTranscripts)
		}
		fr := withForward(r, f)
		fr.Body = io.NopCloser(bytes.NewReader(out))
		fr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
		fr.ContentLength = int64(len(out))
		fr.TransferEncoding = nil
		var k *readOn
		if f.capture != nil && !f.capture.background {
			// A stream whose client hangs up after a whole answer is
			// read on to its end (hangup.go).
			k, fr = p.readOnAfterHangUp(r.Context(), fr, f.capture)
			defer func() {
				if k.release() {
					x.SetStatus(server.StatusClientClosed)
				}
			}()
		}
		p.rp.ServeHTTP(newFinalWriter(w, k), fr)
		// The reverse proxy returns (rather than aborting the response) only
		// when the upstream's whole answer reached the client.
		if f.capture != nil {
			f.capture.finish(r.Context())
		}
		return nil
	}
}

// markUnstored adds memory.DegradedCapture to X-Memory-Degraded and to
// x's access-log line, and counts it, when the request's cut leaves
// messages of its resent history or of its turn unstored (cut.Skipped,
// cut.TurnSkipped).
func (p *Proxy) markUnstored(h http.Header, x *server.Exchange, cut memory.Cut) {
	if cut.Skipped == 0 && cut.TurnSkipped == 0 {
		return
	}
	p.addDegraded(h, x, memory.DegradedCapture)
}

// addDegraded adds part to X-Memory-Degraded, after the parts already
// there, and to x's access-log line, and counts it.
func (p *Proxy) addDegraded(h http.Header, x *server.Exchange, part string) {
	p.m.degraded.WithLabelValues(part).Inc()
	x.AddDegraded(part)
	if d := h.Get("X-Memory-Degraded"); d != "" {
		h["X-Memory-Degraded"] = []string{d + "," + part}
		return
	}
	h["X-Memory-Degraded"] = []string{part}
}

// inject returns the body the API's adapter renders from prepared, the
// Preparer's answer for mreq (prepareWithin), setting the X-Memory-* response headers
// and the exchange's memory accounting. A part that did not load is named
// in X-Memory-Degraded (comma-separated, e.g. "embedding" or
// "recall,summary") and the rest of memory is still used; when preparing
// fails as a whole the client's body goes unchanged, marked "store" when
// the store is unreachable, else "all".
func (p *Proxy) inject(ctx context.Context, h http.Header, x *server.Exchange, req *dialect.Request, mreq memory.Request, prepared prepareResult) []byte {
	prep, err := prepared.p, prepared.err
	var out []byte
	if err == nil {
		out, err = req.Render(prep)
	}
	if err != nil {
		part := memory.DegradedAll
		if errors.Is(err, memory.ErrUnavailable) {
			part = memory.DegradedStore
		}
		p.m.degraded.WithLabelValues(part).Inc()
		h["X-Memory-Degraded"] = []string{part}
		x.SetMemory(0, 0, part)
		p.log.LogAttrs(ctx, slog.LevelWarn, "memory unavailable, forwarding without it",
			slog.String("request_id", x.ID()), slog.String("api", string(req.API)),
			slog.String("degraded", part), slog.String("error", err.Error()))
		return req.Raw
	}
	saved := max(0, prep.TokensOriginal-prep.TokensSent)
	p.m.tokensSent.Add(float64(prep.TokensSent))
	p.m.tokensSaved.Add(float64(saved))
	degraded := strings.Join(prep.Degraded, ",")
	for _, part := range prep.Degraded {
		p.m.degraded.WithLabelValues(part).Inc()
	}
	if degraded != "" {
		h["X-Memory-Degraded"] = []string{degraded}
	}
	x.SetMemory(prep.TokensSent, saved, degraded)
	h["X-Memory-Tokens-Original"] = []string{strconv.Itoa(prep.TokensOriginal)}
	h["X-Memory-Tokens-Sent"] = []string{strconv.Itoa(prep.TokensSent)}
	if prep.OverBudget {
		h["X-Memory-Over-Budget"] = []string{"true"}
	}
	if req.ThinkingDisabled() {
		// The client asked for thinking; this step goes without it.
		h["X-Memory-Thinking"] = []string{"disabled"}
	}
	// What the provider's prompt cache can serve: the prompt tokens that
	// repeat this conversation's previous request from the first byte.
	k := newPrefixKey(mreq.Tenant, mreq.User, mreq.Conversation, string(req.API), req.Model)
	repeated := repeatedTokens(p.prefix.repeat(k, out), len(out), prep.TokensSent)
	p.m.prefixRepeated.Add(float64(repeated))
	if p.deps.Cache != nil {
		p.deps.Cache.Repeated(mreq.Tenant, repeated)
	}
	h["X-Memory-Prefix-Tokens"] = []string{strconv.Itoa(repeated)}
	return out
}

// cacheBreakpoints reports whether a /v1/messages prompt gets cache_control
// breakpoints: X-Memory-Cache-Breakpoints (on, true, 1 or off, false, 0)
// when the request sends it, else Options.CacheBreakpoints. Any other value
// is a 400 naming the header.
func (p *Proxy) cacheBreakpoints(h http.Header) (bool, *apierr.Error) {
	return dialect.OnOff(h, "X-Memory-Cache-Breakpoints", p.opts.CacheBreakpoints)
}
