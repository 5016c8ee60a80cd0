// Package proxy forwards memgate's /v1 routes to the upstream through one
// path, httputil.ReverseProxy over the gateway's http.Transport: every route
// goes upstream unchanged, except that the three APIs served with memory —
// chat completions, the Anthropic Messages API and the OpenAI Responses API
// — pass through one memory seam: the API's adapter (internal/dialect)
// reads the body, Preparer assembles the prompt, the adapter renders it
// back, and Capturer receives the finished exchange. Retries, circuit
// breakers per upstream, tenant and model, and the idle-stream timeout are
// RoundTripper layers under the reverse proxy; memory plugs into its
// Rewrite and ModifyResponse hooks.
package proxy

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/proxy/upstream"
	"github.com/memgate/memgate/internal/server"
)

// Deps are the proxy's optional collaborators. With all of them nil the
// proxy is a plain OpenAI pass-through.
type Deps struct {
	// Resolver maps a request to its identity and memory mode; nil means
	// memory is off for every request and no gateway key is checked.
	Resolver IdentityResolver
	// Preparer rewrites the messages of memory-on chat requests.
	Preparer Preparer
	// Capturer receives completed exchanges of storing modes.
	Capturer Capturer
	// Router places a request whose conversation was derived from its
	// history in the branch of it that the history continues; nil: it
	// stays in the derived conversation.
	Router Router
	// Browser refuses the requests a web page could make (foreign Host,
	// cross-origin, non-JSON bodies on the memory routes); nil when gateway
	// keys protect the routes.
	Browser *server.BrowserGuard
	// Limiter refuses clients that presented too many bad gateway keys;
	// nil limits nothing.
	Limiter *server.FailureLimiter

	// States records whose each provider state (a stored response, a
	// conversation) is, when gateway keys are configured and the upstream
	// key replaces the client's; nil then refuses every request naming one
	// (503) and binds nothing.
	States StateBinder

	// Prints, when set, are the prints of users' newest exchanges that
	// the gateway processes share (Redis), so that a request about a chat
	// is told on any of them (Options.SkipTranscripts); nil: each
	// process's own.
	Prints PrintStore

	// Resenders, when set, are the users seen resending their history
	// that the gateway processes share (Redis), so that a new chat's
	// first turn is told on any of them (see resenders); nil: each
	// process's own.
	Resenders ResenderStore

	// Cache, when set, counts per tenant the prompt tokens that repeat the
	// previous request's prefix and those the provider reported reading
	// from its cache.
	Cache CacheCounter

	// Held keeps the exchanges of background responses in the store the
	// gateway processes share until a GET on any of them returns the
	// response done (pending.go); nil: each process holds its own.
	Held HeldResponses
}

// CacheCounter counts prompt-cache tokens per tenant (implemented by
// internal/savings).
type CacheCounter interface {
	// Repeated counts prompt tokens that repeat the previous request's
	// prefix of the same conversation.
	Repeated(tenant string, tokens int)
	// Cached counts prompt tokens the provider reported reading from its
	// prompt cache.
	Cached(tenant string, tokens int)
}

// Proxy forwards requests to the upstream.
type Proxy struct {
	opts Options
	deps Deps
	log  *slog.Logger
	m    *metrics
	// chat, messages and responses are the APIs served with memory; chat
	// (its upstream the OpenAI one) also serves the passthrough routes.
	chat, messages, responses *api
	transport                 *http.Transport
	rp                        *httputil.ReverseProxy
	// allowed are the passthrough routes gateway keys may reach.
	allowed []routeRule
	// captures are the stream captures still being reassembled after
	// their response ended; Wait and Drain wait for them.
	captures captureGroup
	// prefix measures what each request's prompt repeats of the previous
	// request's (the provider's prompt cache).
	prefix *prefixes
	// transcripts tells requests about a conversation from its turns
	// (nil without Options.SkipTranscripts).
	transcripts *transcripts
	// resenders are the users seen resending their history, whose
	// requests landing in the default conversation are new chats.
	resenders *resenders
	// pending are the captures of background responses awaiting their
	// answer (pending.go).
	pending *pendingResponses
}

// New returns a proxy for opts.Upstream whose metrics are registered on
// reg.
func New(opts Options, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Proxy, error) {
	openai, err := newTarget(opts.Upstream.BaseURL, "Authorization", opts.Upstream.APIKey, "Bearer ")
	if err != nil {
		return nil, fmt.Errorf("upstream base url: %w", err)
	}
	claude, err := newTarget(opts.Upstream.Anthropic.BaseURL, "X-Api-Key", opts.Upstream.Anthropic.APIKey, "")
	if err != nil {
		return nil, fmt.Errorf("anthropic base url: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register proxy metrics: %w", err)
	}
	p := &Proxy{opts: opts, deps: deps, log: logger, m: m, prefix: newPrefixes(), transport: upstream.NewTransport(opts.Upstream.transport()),
		chat: chatAPI(openai), messages: messagesAPI(claude), responses: responsesAPI(openai)}
	p.pending = newPendingResponses(time.Now, func(c *exchangeCapture) { c.skipped(errBackgroundLost) })
	p.resenders = newResenders(deps.Resenders, forgetTimeout, time.Now, func(err error) {
		m.newChatSignal.WithLabelValues(newChatSignalWrite).Inc()
		logger.Debug("a user seen resending their history not shared", "error", err.Error())
	})
	if opts.SkipTranscripts {
		p.transcripts = newTranscripts(time.Now, deps.Prints, cmp.Or(opts.PrintsTimeout, printsTimeout))
	}
	if p.allowed, err = parseRoutes(opts.Passthrough); err != nil {
		return nil, fmt.Errorf("passthrough routes: %w", err)
	}
	var base http.RoundTripper = p.transport
	if opts.WrapTransport != nil {
		base = opts.WrapTransport(base)
	}
	rt := &retryTransport{
		next: &breakerTransport{
			next:     &idleTransport{next: base, d: opts.Upstream.IdleStreamTimeout},
			breakers: newBreakers(opts.Upstream.Breaker, m, logger),
		},
		retries:   opts.Upstream.Retries,
		baseDelay: opts.Upstream.RetryBaseDelay,
		maxDelay:  opts.Upstream.RetryMaxDelay,
		retried:   m.retries,
	}
	p.rp = p.newReverseProxy(rt)
	return p, nil
}

// Register adds the proxy's routes to srv: the three APIs served with
// memory (routes "chat", "messages", "responses" in metrics and logs), and
// every other /v1 route passed through ("passthrough") — /v1/messages/…
// (count_tokens, batches) and an Anthropic client's /v1/models and
// /v1/files… to the Anthropic upstream, the rest to the OpenAI one
// (handleOther); with gateway keys, only the allow-listed ones
// (Options.Passthrough) and an Anthropic client's own files (files.go).
// Every route is behind the failed-key limiter and the browser guard
// (Deps), which answer in the route's error shape (otherEdge: the
// client's, on the routes no API owns).
func (p *Proxy) Register(srv *server.Server) {
	e := srv.Echo()
	pass := srv.Route("passthrough")
	// Stored chat completions and responses (GET, DELETE) and CORS
	// preflights are the upstream's business.
	others := []string{http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodPut, http.MethodPatch, http.MethodOptions}
	for _, a := range []struct {
		path string
		api  *api
	}{{"/v1/chat/completions", p.chat}, {"/v1/messages", p.messages}, {"/v1/responses", p.responses}} {
		e.POST(a.path, p.handleMemory(a.api), p.edge(srv.Route(string(a.api.name)), a.api, true)...)
		e.Match(others, a.path, p.handlePassthrough(a.api), p.edge(pass, a.api, false)...)
	}
	e.Any("/v1/messages/*", p.handlePassthrough(p.messages), p.edge(pass, p.messages, false)...)
	e.Any("/v1/*", p.handleOther(), pass, p.otherEdge())
}

// otherEdge is the failed-key limiter and the browser guard of the routes
// no API owns (handleOther): an Anthropic client's refusals
// (anthropicClient) in Anthropic's shape, any other's in OpenAI's.
func (p *Proxy) otherEdge() echo.MiddlewareFunc {
	chain := func(a *api, next echo.HandlerFunc) echo.HandlerFunc {
		return p.deps.Limiter.Middleware(a.writeError)(p.deps.Browser.Middleware(false, a.writeError)(next))
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		claude, openai := chain(p.messages, next), chain(p.chat, next)
		return func(c echo.Context) error {
			if anthropicClient(c.Request().Header) {
				return claude(c)
			}
			return openai(c)
		}
	}
}

// edge returns a route's middleware: its name, then the failed-key limiter
// and the browser guard, answering in a's error shape; jsonBody marks a
// route whose bodies must be JSON.
func (p *Proxy) edge(route echo.MiddlewareFunc, a *api, jsonBody bool) []echo.MiddlewareFunc {
	return []echo.MiddlewareFunc{route, p.deps.Limiter.Middleware(a.writeError), p.deps.Browser.Middleware(jsonBody, a.writeError)}
}

// Wait waits for the captures of streams that already ended to reach the
// Capturer, and for the shared writes of users seen resending their
// history under way; call it after the server stopped and before closing
// the Capturer.
func (p *Proxy) Wait() {
	p.captures.Wait()
	p.resenders.wait()
}

// Drain is Wait at shutdown, once the server stopped serving: a handler
// the server gave up on (the shutdown grace ran out) and that ends its
// stream later starts no capture (counted as not captured, shutdown); an
// upstream read on after its client hung up is cancelled, and its turn
// stored as it was whole at the hang-up before Drain returns.
func (p *Proxy) Drain() {
	p.captures.Drain()
	p.resenders.wait()
}

// CloseIdleConnections closes the pooled upstream connections.
func (p *Proxy) CloseIdleConnections() { p.transport.CloseIdleConnections() }

// Forget drops the prints of the user of tenant kept to tell their
// requests about a chat (see transcripts), this process's and the shared
// ones (within a short bound; a failure is counted and logged), and
// whether they were seen resending their history (resenders), this
// process's and the shared signal (likewise): the user was erased, or one
// of their conversations deleted. The background exchanges this process
// holds of the user go to the shared store, which keeps those neither
// erased nor deleted (forgetHeld). Proxy is so a cache.Forgetter the
// erasures reach, on every process.
func (p *Proxy) Forget(tenant, user string) {
	p.forgetHeld(tenant, user)
	if err := p.resenders.forget(context.Background(), tenant, user); err != nil {
		p.m.newChatSignal.WithLabelValues(newChatSignalForget).Inc()
		p.log.Warn("the shared signal that an erased user resends their history was not deleted; it expires on its own", "within", resenderMaxAge.String(), "error", err.Error())
	}
	if p.transcripts == nil {
		return
	}
	if err := p.transcripts.forget(context.Background(), transcriptKey(tenant, user)); err != nil {
		p.m.prints.WithLabelValues(printsForget).Inc()
		p.log.Warn("the shared prints of an erased user were not deleted; they expire on their own", "within", transcriptMaxAge.String(), "error", err.Error())
	}
}

// Clear drops this process's prints of every user, and who was seen
// resending their history (erasures may have been missed); the shared
// prints, which the erasing process deleted, stay. The background
// responses' held exchanges stay too: they are turns waiting for their
// answer, not a cache (nothing would store them again), and a clear
// comes each time the erasure notices' subscription starts or reconnects;
// one of a user erased while a notice was missed is refused by the store
// (said before the erasure), as every late turn of theirs is.
func (p *Proxy) Clear() {
	p.resenders.clear()
	if p.transcripts != nil {
		p.transcripts.clear()
	}
}

// requireKey reports whether gateway keys guard the /v1 routes.
func (p *Proxy) requireKey() bool { return p.deps.Resolver != nil && p.deps.Resolver.RequireKey() }
