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
	"slices"
	"time"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect/anthropic"
	"github.com/memgate/memgate/internal/dialect/responses"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// Provider state per tenant. With gateway keys and an upstream key that
// replaces the client's, every tenant reaches the provider as the
// operator: a stored response, its output items or a conversation one
// tenant's user created are, to the provider, the operator's, and any
// request naming their ids gets their content. The proxy therefore records, from the upstream's reply,
// whose each such state is (StateBinder), and answers a request naming a
// state not recorded for its tenant and user as the provider answers an
// unknown id, without calling upstream. When it cannot tell (the store is
// down) it refuses: an id it could not check never goes through.

// StateBinder records and checks whose each provider state is
// (implemented by internal/engine over the memory store).
type StateBinder interface {
	// BindState records that b.States belong to b.Tenant's b.User.
	BindState(ctx context.Context, b memory.StateBinding) error
	// BoundStates reports, for each of sts, whether it is bound to
	// tenant's user and has not lapsed by now.
	BoundStates(ctx context.Context, tenant, user string, sts []memory.ProviderState, now time.Time) ([]bool, error)
}

// maxBoundReplyBytes bounds the whole JSON reply whose ids are bound as
// it is relayed (responses.CreatedReader): at some 20–25 ns a byte
// (BenchmarkCreatedReader), such a reply costs at most about 0.8 s of a
// core to read.
const maxBoundReplyBytes = 32 << 20

// bindTimeout bounds one binding's write; a stream's relay waits for it.
const bindTimeout = 5 * time.Second

// sharedKey reports whether requests of a reach the provider with the
// operator's key on behalf of every tenant: gateway keys are configured
// (the client's Authorization is its gateway key) and a's upstream key
// replaces the client's credentials.
func (p *Proxy) sharedKey(a *api) bool { return p.requireKey() && a.up.shared() }

// checkStates returns the error answering a request of id that names a
// provider state not bound to id's tenant and user — notFound's, the
// provider's own answer to an id it does not hold — or a 503 when the
// binding store cannot say; nil when every state is id's. The ids its
// items give that the API requires as sent (required:
// dialect.Request.RequiredIDs, StateBody.RequiredIDs) must be id's too,
// else the request is refused as naming an unknown item (unknownItem).
// Of the ids the request's items give beside their content (carried:
// dialect.Request.CarriedIDs, StateBody.CarriedIDs) it drops those not
// id's through drop (dropForeignIDs). The store is asked once for all.
func (p *Proxy) checkStates(ctx context.Context, id memory.Identity, states []memory.ProviderState, required []responses.RequiredID,
	carried []memory.ProviderState, notFound func(memory.ProviderState) *apierr.Error, drop func([]bool) error) *apierr.Error {
	if len(states)+len(required)+len(carried) == 0 {
		return nil
	}
	checked := slices.Clip(states)
	for _, r := range required {
		checked = append(checked, memory.ProviderState{Kind: memory.StateItem, ID: r.ID})
	}
	bound, err := p.boundStates(ctx, id, append(checked, carried...))
	if err != nil && len(checked) > 0 {
		p.m.states.WithLabelValues(stateUnverified).Inc()
		p.log.LogAttrs(ctx, slog.LevelWarn, "provider state unverifiable, request refused",
			slog.String("request_id", server.ExchangeOf(ctx).ID()), slog.String("kind", string(checked[0].Kind)), slog.String("error", err.Error()))
		return &apierr.Error{Status: http.StatusServiceUnavailable, Type: apierr.TypeServer, Code: "provider_state_unverifiable",
			Message: "memgate cannot check that the " + stateNoun(checked[0].Kind) + " this request names belongs to its tenant and user (its store is unavailable), so it does not forward it. Retry later."}
	}
	if err != nil {
		p.log.LogAttrs(ctx, slog.LevelWarn, "input item ids unverifiable, dropped",
			slog.String("request_id", server.ExchangeOf(ctx).ID()), slog.String("error", err.Error()))
		bound = make([]bool, len(carried))
	}
	for i, ok := range bound[:len(checked)] {
		if ok {
			continue
		}
		p.m.states.WithLabelValues(stateRefused).Inc()
		if i < len(states) {
			return notFound(states[i])
		}
		return unknownItem(required[i-len(states)])
	}
	return p.dropForeignIDs(ctx, bound[len(checked):], drop)
}

// boundStates reports, for each of states, whether it is bound to id's
// tenant and user.
func (p *Proxy) boundStates(ctx context.Context, id memory.Identity, states []memory.ProviderState) ([]bool, error) {
	if p.deps.States == nil {
		return nil, errors.New("no provider state store")
	}
	bound, err := p.deps.States.BoundStates(ctx, id.Tenant, id.User, states, time.Now())
	if err == nil && len(bound) != len(states) {
		err = fmt.Errorf("the store answered %d of %d provider states", len(bound), len(states))
	}
	return bound, err
}

// dropForeignIDs drops the ids a request's items give beside their
// content that are not bound to its tenant and user (bound: one flag per
// id), through drop (one flag per id: true to drop; not called when none
// is). The provider reads such an item from its content, yet may hold a
// stored item under its id, which must not reach another's request: the
// item goes upstream with its content and without the id, which the API
// does not require of it. When the store cannot say (bound all false),
// every such id is dropped: that refuses nobody, and no id memgate could
// not check goes through. The caller's own ids go as sent.
func (p *Proxy) dropForeignIDs(ctx context.Context, bound []bool, drop func([]bool) error) *apierr.Error {
	dropped := make([]bool, len(bound))
	n := 0
	for i, ok := range bound {
		if !ok {
			dropped[i] = true
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if err := drop(dropped); err != nil {
		p.log.LogAttrs(ctx, slog.LevelError, "input item ids not dropped, request refused",
			slog.String("request_id", server.ExchangeOf(ctx).ID()), slog.String("error", err.Error()))
		return &apierr.Error{Status: http.StatusInternalServerError, Type: apierr.TypeServer,
			Message: "memgate could not remove the input item ids this request may not name."}
	}
	p.m.states.WithLabelValues(stateIDDropped).Add(float64(n))
	return nil
}

// stateNoun names a provider state's kind in an error message.
func stateNoun(k memory.StateKind) string {
	switch k {
	case memory.StateConversation:
		return "conversation"
	case memory.StateItem:
		return "input item"
	case memory.StateContainer:
		return "container"
	case memory.StateFile:
		return "file"
	}
	return "previous response"
}

// unknownPathState is the provider's answer to a request whose path names
// a state it does not hold (GET /v1/responses/{id}, /v1/conversations/{id}/items).
func unknownPathState(s memory.ProviderState) *apierr.Error {
	noun := "Response"
	if s.Kind == memory.StateConversation {
		noun = "Conversation"
	}
	return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest,
		Message: fmt.Sprintf("%s with id '%s' not found.", noun, s.ID)}
}

// unknownState is the provider's answer to a request body naming a state
// it does not hold (previous_response_id, conversation, an input item by
// id).
func unknownState(s memory.ProviderState) *apierr.Error {
	switch s.Kind {
	case memory.StateItem:
		return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Param: "input",
			Message: fmt.Sprintf("Item with id '%s' not found.", s.ID)}
	case memory.StateConversation:
		return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Param: "conversation",
			Message: fmt.Sprintf("Conversation with id '%s' not found.", s.ID)}
	case memory.StateContainer:
		return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Param: "tools",
			Message: fmt.Sprintf("Container with id '%s' not found.", s.ID)}
	case memory.StateFile:
		return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Param: "messages",
			Message: fmt.Sprintf("File with id '%s' not found.", s.ID)}
	}
	return &apierr.Error{Status: http.StatusBadRequest, Type: apierr.TypeInvalidRequest, Param: "previous_response_id",
		Code: "previous_response_not_found", Message: fmt.Sprintf("Previous response with id '%s' not found.", s.ID)}
}

// unknownItem answers a request whose item gives an id the API requires
// (responses.RequiredID) that is not bound to the caller: a 400 naming
// the member, worded as the provider's answer to an id it does not hold,
// the same for another's id as for one never given out.
func unknownItem(r responses.RequiredID) *apierr.Error {
	return apierr.Invalid(r.Param, fmt.Sprintf("Item with id '%s' not found.", r.ID))
}

// Outcomes of the provider state checks and bindings
// (memgate_provider_states_total).
const (
	stateBound      = "bound"
	stateBindFailed = "bind_failed"
	stateRefused    = "refused"
	stateUnverified = "unverifiable"
	stateIDDropped  = "id_dropped"
)

// stateBind binds the provider states a reply creates — the response or
// conversation it answers with, and a response's output items — to the
// tenant's user whose request it answers.
type stateBind struct {
	p    *Proxy
	x    *server.Exchange
	kind memory.StateKind
	// tenant and user own the state; at is when the request arrived.
	tenant, user string
	at           time.Time
	// items: only the items the reply names are bound — of a state
	// the request named and that was verified as the tenant's user's (a
	// response or conversation in its path: a background response's
	// output, a conversation's items), or of a response the provider
	// keeps nowhere (store: false), whose items come back with their
	// ids; its own id is not read, and a reply naming none binds
	// nothing.
	items bool
	// container: the reply is a Messages reply, of which only the
	// container it ran in and the files its code wrote are bound
	// (attachContainer).
	container bool
	// created is set once the reply's own id was bound (or given up
	// on); done once its items were too: nothing more is read. named is
	// set once a reply read as it is relayed (CreatedReader) gave its id.
	created, done, named bool
}

// itemsBind returns the binding of the items a reply to a request of
// id's names (stateBind.items): whose path named a state verified as
// id's, or that asked the provider to keep nothing.
func (p *Proxy) itemsBind(x *server.Exchange, id memory.Identity) *stateBind {
	b := p.newBind(x, id, memory.StateItem, time.Now())
	b.items = true
	return b
}

// containerBind returns the binding to id's tenant and user of the
// container and the files a Messages reply to the request of x names.
func (p *Proxy) containerBind(x *server.Exchange, id memory.Identity) *stateBind {
	b := p.newBind(x, id, memory.StateContainer, time.Now())
	b.items, b.container = true, true
	return b
}

// newBind returns the binding to id's tenant and user of the state of
// kind a reply to the request of x, arrived at at, creates.
func (p *Proxy) newBind(x *server.Exchange, id memory.Identity, kind memory.StateKind, at time.Time) *stateBind {
	return &stateBind{p: p, x: x, kind: kind, tenant: id.Tenant, user: id.User, at: at}
}

// states are the states c names: its own id, of b's kind (unless b binds
// items only), its items' ids and the containers they ran in (which the
// provider keeps whether or not it keeps the response).
func (b *stateBind) states(c responses.Created) []memory.ProviderState {
	var out []memory.ProviderState
	if c.ID != "" && !b.items {
		out = append(out, memory.ProviderState{Kind: b.kind, ID: c.ID})
	}
	for _, id := range c.Items {
		out = append(out, memory.ProviderState{Kind: memory.StateItem, ID: id})
	}
	for _, id := range c.Containers {
		out = append(out, memory.ProviderState{Kind: memory.StateContainer, ID: id})
	}
	return out
}

// attach reads the ids of the states resp creates and binds them before
// the client reads them: a whole JSON reply is read here (up to
// maxCaptureBytes) and its top-level id and output items' ids bound; a
// larger one is read as it is relayed (responses.CreatedReader), a
// top-level member or an item at a time, each id bound before the client
// reads the bytes naming it, and nothing from a member or item larger
// than maxCaptureBytes, or past maxBoundReplyBytes, on; an event stream
// of any length is read event by event as it is relayed
// (responses.CreatedStream), and the first event's response id is bound
// before the read that completes that event returns, an output item's
// id before the read completing the first output_item event naming it
// does, the terminal event's output items' not bound yet before its
// does; nothing from an event naming states larger than maxCaptureBytes
// on. A reply that names no id binds nothing: nobody may continue it. A
// binding of items reads a whole reply's output or list items
// (responses.ItemsFromJSON) and a stream's output items.
func (b *stateBind) attach(ctx context.Context, resp *http.Response) error {
	if b.container {
		return b.attachContainer(ctx, resp)
	}
	if eventStream(resp) {
		b.scanStream(ctx, resp, func(found func([]memory.ProviderState, bool)) io.Writer {
			return responses.NewCreatedStream(maxCaptureBytes, func(c responses.Created, final bool) {
				b.created = b.created || c.ID != ""
				found(b.states(c), final)
			})
		})
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxCaptureBytes+1))
	if err != nil {
		return fmt.Errorf("read upstream reply: %w", err)
	}
	rest := io.MultiReader(bytes.NewReader(buf), resp.Body)
	if len(buf) > maxCaptureBytes {
		// Too large to hold: read as it is relayed, a member or an item
		// at a time, each no larger than maxCaptureBytes.
		b.created, b.done = true, true
		resp.Body = readCloser{Reader: responses.NewCreatedReader(rest, maxCaptureBytes, maxBoundReplyBytes, func(c responses.Created, final bool) {
			if sts := b.states(c); len(sts) > 0 {
				b.bind(ctx, sts)
			}
			b.named = b.named || c.ID != ""
			if final && !b.items && !b.named {
				b.failed(ctx, errors.New("the reply names no id"))
			}
		}, func(err error) { b.failed(ctx, err) }), Closer: resp.Body}
		return nil
	}
	resp.Body = readCloser{Reader: rest, Closer: resp.Body}
	read := responses.CreatedFromJSON
	if b.items {
		read = responses.ItemsFromJSON
	}
	c, err := read(buf)
	if err != nil {
		b.failed(ctx, err)
		return nil
	}
	b.created, b.done = true, true
	if sts := b.states(c); len(sts) > 0 {
		b.bind(ctx, sts)
	}
	return nil
}

// attachContainer binds the states a Messages reply names — the
// container it ran in and the files its code execution wrote — before
// the client reads them: a whole JSON reply is read here, up to
// maxCaptureBytes; a larger one is read as it is relayed
// (anthropic.ReplyReader), a top-level member or a content block at a
// time, each state bound before the client reads the bytes naming it,
// and nothing from a block larger than maxCaptureBytes, or past
// maxBoundReplyBytes, on; an event stream of any length is read event by
// event as it is relayed (anthropic.StateStream), each state bound
// before the read that completes the event naming it returns.
func (b *stateBind) attachContainer(ctx context.Context, resp *http.Response) error {
	if eventStream(resp) {
		b.scanStream(ctx, resp, func(found func([]memory.ProviderState, bool)) io.Writer {
			return anthropic.NewStateStream(maxCaptureBytes, found)
		})
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxCaptureBytes+1))
	if err != nil {
		return fmt.Errorf("read upstream reply: %w", err)
	}
	rest := io.MultiReader(bytes.NewReader(buf), resp.Body)
	b.created, b.done = true, true
	if len(buf) > maxCaptureBytes {
		// Too large to hold: read as it is relayed, a member or a
		// content block at a time, each no larger than maxCaptureBytes.
		resp.Body = readCloser{Reader: anthropic.NewReplyReader(rest, maxCaptureBytes, maxBoundReplyBytes, func(sts []memory.ProviderState, _ bool) {
			if len(sts) > 0 {
				b.bind(ctx, sts)
			}
		}, func(err error) { b.failed(ctx, err) }), Closer: resp.Body}
		return nil
	}
	resp.Body = readCloser{Reader: rest, Closer: resp.Body}
	sts, err := anthropic.ReplyStates(buf)
	switch {
	case err != nil:
		b.failed(ctx, err)
	case len(sts) > 0:
		b.bind(ctx, sts)
	}
	return nil
}

// eventStream reports whether resp's body is an event stream.
func eventStream(resp *http.Response) bool {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return ct == "text/event-stream"
}

// scanStream relays resp's event stream through the scanner newScan makes
// (a responses.CreatedStream, an anthropic.StateStream) over found,
// which the scanner calls with the states an event names, and final for
// the terminal one: the states the events a read completes name are bound
// before it returns.
func (b *stateBind) scanStream(ctx context.Context, resp *http.Response, newScan func(found func([]memory.ProviderState, bool)) io.Writer) {
	body := &stateBody{ReadCloser: resp.Body, b: b}
	body.scan = newScan(func(sts []memory.ProviderState, final bool) {
		body.final = body.final || final
		body.found = append(body.found, sts...)
	})
	body.bind = func() { b.bind(ctx, body.found) }
	resp.Body = body
}

// bind records that sts belong to the request's tenant and user,
// detached from the client (a hang-up does not undo it).
func (b *stateBind) bind(ctx context.Context, sts []memory.ProviderState) {
	if b.p.deps.States == nil {
		b.failed(ctx, errors.New("no provider state store"))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bindTimeout)
	defer cancel()
	err := b.p.deps.States.BindState(ctx, memory.StateBinding{Tenant: b.tenant, User: b.user,
		States: sts, At: b.at, Expires: time.Now().Add(b.p.opts.StateRetention)})
	if err != nil {
		b.failed(ctx, err)
		return
	}
	b.p.m.states.WithLabelValues(stateBound).Add(float64(len(sts)))
}

// failed counts and logs states that could not be bound, and stops
// reading for more: their owner cannot name them again.
func (b *stateBind) failed(ctx context.Context, err error) {
	b.created, b.done = true, true
	b.p.m.states.WithLabelValues(stateBindFailed).Inc()
	b.p.log.LogAttrs(ctx, slog.LevelWarn, "provider state not bound: its owner cannot name it again",
		slog.String("request_id", b.x.ID()), slog.String("kind", string(b.kind)), slog.String("error", err.Error()))
}

// stateBody scans a relayed event stream for the states it creates until
// they are bound; bytes pass through unchanged. The states the events a
// read completes name are bound together (one write) before it returns.
type stateBody struct {
	io.ReadCloser
	b     *stateBind
	scan  io.Writer              // a responses.CreatedStream, an anthropic.StateStream
	found []memory.ProviderState // named by the events of this read
	final bool                   // the terminal event was read
	bind  func()                 // binds found
}

func (s *stateBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if n > 0 && !s.b.done {
		_, derr := s.scan.Write(p[:n])
		if len(s.found) > 0 {
			s.bind()
			s.found = s.found[:0]
		}
		switch {
		case derr != nil:
			s.b.failed(context.Background(), derr)
		case s.final:
			s.b.done = true
		}
	}
	return n, err
}

// Close counts a stream that ended before naming its response (a
// retrieved stream that ended early names nothing new).
func (s *stateBody) Close() error {
	if !s.b.created && !s.b.items {
		s.b.failed(context.Background(), errors.New("the stream named no response id"))
	}
	return s.ReadCloser.Close()
}
